"""FLOPs of a config's model with mmengine's complexity analysis, as mmpretrain's ``tools/analysis_tools/get_flops.py``
counts them (:class:`mmengine.analysis.FlopAnalyzer`: one multiply-add is one FLOP; matrix products, convolutions
and norms are counted, elementwise ops are not), plus the operators of ours that mmengine has no handle for:

* ``aten::scaled_dot_product_attention`` (every attention of ours runs through SDPA): ``B H Nq Nk (Dqk + Dv)``, the
  two products of the full ``Nq x Nk`` rectangle, also under ``is_causal`` or a mask (what a dense kernel computes);
* ``aten::baddbmm`` (CaiT's talking-heads mixing) as ``aten::bmm``;
* SwiGLU's gated output projection (:class:`~mmcausal.models.layers.fast_paths.GatedProjection`, an autograd function
  that the trace sees as one ``prim::PythonOp``): its linear layer, ``tokens x h x out``;
* RMSNorm (``RMSNormFunction``) as mmengine counts LayerNorm with an affine weight (5 per element).

What is counted, per kind of config (inference, batch 1, no test-time augmentation):

* classifiers and MAE pre-training: ``extract_feat`` (backbone and neck, no head; MAE's encoder without masking),
  mmpretrain's convention, at the config's test crop (the training crop for pre-training);
* segmentors: the whole network in tensor mode (backbone, neck, decode head; no auxiliary head) at the crop size;
  a multi-scale + flip test config counts one pass of its model (it runs one per scale and flip);
* detectors: ``extract_feat`` (backbone and neck) at the test scale: the heads' cost depends on the proposals;
* CLIP (``ContrastiveCLIP``): ``extract_feat`` of one image and one caption of ``context_length`` ids (both towers
  and projections: what one image-text pair costs; OpenCLIP reports the two towers' sum too);
* DiT / SiT: one call of the diffusion network ``network(x, t, y)`` on one latent of its training size (sampling
  costs this times the steps, twice with guidance).

The model is built on the meta device and given uninitialised CPU storage: the count depends on shapes only.
"""
import importlib
from math import prod
from typing import Any, List, Optional, Tuple, Union

import torch
from mmengine.analysis import FlopAnalyzer
from mmengine.analysis.jit_handles import bmm_flop_jit, get_shape
from mmengine.config import Config
from mmengine.registry import init_default_scope
from torch import nn


def sdpa_flop_jit(inputs: List[Any], outputs: List[Any]) -> int:
    """``aten::scaled_dot_product_attention(q, k, v, ...)``: ``q k^T`` and ``P v`` over the full ``Nq x Nk``
    rectangle, ``B H Nq Nk (Dqk + Dv)`` multiply-adds (leading dims of any number)."""
    q, k, v = (get_shape(value) for value in inputs[:3])
    return prod(q[:-1]) * k[-2] * (q[-1] + v[-1])


def gated_projection_flop_jit(inputs: List[Any], outputs: List[Any]) -> int:
    """``linear(silu(x1) * x2, weight)`` for ``x12 = [x1, x2]``: ``tokens x h x out`` (the weight is ``out x h``)."""
    x12, weight = get_shape(inputs[0]), get_shape(inputs[1])
    return prod(x12[:-1]) * weight[0] * weight[1]


def rms_norm_flop_jit(inputs: List[Any], outputs: List[Any]) -> int:
    """RMSNorm with a weight: 5 per element, as mmengine counts an affine LayerNorm."""
    return prod(get_shape(inputs[0])) * (5 if get_shape(inputs[1]) is not None else 4)


#: The handles ``FlopAnalyzer`` lacks for the operators our models run (names as the JIT trace shows them).
EXTRA_FLOP_HANDLES = {
    'aten::scaled_dot_product_attention': sdpa_flop_jit,
    'aten::baddbmm': lambda inputs, outputs: bmm_flop_jit(inputs[1:3], outputs),
    'prim::PythonOp.GatedProjection': gated_projection_flop_jit,
    'prim::PythonOp.RMSNormFunction': rms_norm_flop_jit,
}


def flop_analyzer(model: nn.Module, inputs: Tuple[Any, ...]) -> FlopAnalyzer:
    """mmengine's analyzer of ``model(*inputs)`` with :data:`EXTRA_FLOP_HANDLES`; call ``.total()`` (under
    ``torch.no_grad()``, so the inference paths are traced)."""
    return FlopAnalyzer(model, inputs).set_op_handle(**EXTRA_FLOP_HANDLES)


class _Counted(nn.Module):
    """What is counted of a built model (module docstring): ``forward`` is that part's call."""

    def __init__(self, model: nn.Module, part: str) -> None:
        super().__init__()
        self.model, self.part = model, part

    def forward(self, *inputs: torch.Tensor) -> Any:
        if self.part == 'network':
            return self.model.network(*inputs)
        if self.part == 'segmentor':
            return self.model._forward(*inputs)
        return self.model.extract_feat(*inputs)


def _transforms(cfg: Config, split: str) -> List[dict]:
    loader = cfg.get(f'{split}_dataloader') or {}
    dataset = loader.get('dataset', {})
    dataset = dataset.get('dataset', dataset)  # a wrapper (RepeatDataset, ...)
    return list(dataset.get('pipeline', None) or cfg.get(f'{split}_pipeline', None) or [])


def _hw(size: Union[int, Tuple[int, int], List[int]], wh: bool) -> Tuple[int, int]:
    if isinstance(size, int):
        return size, size
    return (int(size[1]), int(size[0])) if wh else (int(size[0]), int(size[1]))


def config_input_size(cfg: Config) -> Tuple[int, int]:
    """``(H, W)`` of the input the config's model is counted at: a generation config's latent training size, a
    segmentor's ``crop_size``, else the test pipeline's crop (``CenterCrop``) or fixed scale (``Resize``; both ``(w,
    h)`` as mmcv writes them), else the training crop (``RandomResizedCrop``: pre-training configs)."""
    if 'network' in cfg.model:
        return _hw(cfg.model.network.get('input_size', 32), wh=False)
    if cfg.get('default_scope') == 'mmseg' and 'crop_size' in cfg:
        return _hw(cfg.crop_size, wh=False)
    for split, kinds in (('test', ('CenterCrop', 'Resize')), ('train', ('RandomResizedCrop', ))):
        for transform in _transforms(cfg, split):
            kind = str(transform.get('type', '')).split('.')[-1]
            if kind in kinds:
                size = transform.get('crop_size', transform.get('scale'))
                return _hw(size, wh=kind != 'RandomResizedCrop')  # mmcv's CenterCrop and Resize: (w, h)
    raise ValueError('no input size in the config (no crop or fixed scale in its pipelines): pass one')


def config_flops(cfg: Union[str, Config], size: Optional[Tuple[int, int]] = None) -> int:
    """FLOPs (multiply-adds) of the config's model at ``size`` ``(H, W)`` (default :func:`config_input_size`), batch
    1, counted as the module docstring says."""
    import mmcausal  # noqa: F401  (registers the components)
    cfg = Config.fromfile(cfg) if isinstance(cfg, str) else cfg.copy()
    size = size or config_input_size(cfg)
    if 'module' in cfg.model:  # a test-time-augmentation wrapper: one pass of its model (it runs one per view)
        cfg.model = cfg.model.module
    scope = cfg.get('default_scope', 'mmpretrain')
    init_default_scope(scope)
    registry = importlib.import_module(f'{scope}.registry').MODELS
    cfg.model.pop('init_cfg', None)
    if 'backbone' in cfg.model:
        cfg.model.backbone.init_cfg = None
    cfg.model.setdefault('data_preprocessor', cfg.get('data_preprocessor', None))
    with torch.device('meta'):
        model = registry.build(cfg.model)
    model = model.to_empty(device='cpu').eval()
    if 'network' in cfg.model:
        network = model.network
        inputs = (torch.zeros(1, network.in_channels, *size), torch.zeros(1, dtype=torch.long),
                  torch.zeros(1, dtype=torch.long))
        part = 'network'
    elif 'text_backbone' in cfg.model:
        mask = model.build_attention_mask()  # mmpretrain keeps the causal text mask outside the buffers: still meta
        for block in model.transformer.resblocks:
            block.attn_mask = mask
        inputs = (torch.zeros(1, 3, *size), torch.zeros(1, model.context_length, dtype=torch.long))
        part = 'features'
    else:
        inputs = (torch.zeros(1, 3, *size), )
        part = 'segmentor' if hasattr(model, 'decode_head') else 'features'
    with torch.no_grad():
        analyzer = flop_analyzer(_Counted(model, part), inputs)
        analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        return int(analyzer.total())
