"""Mixed precision and determinism on GPU hosts, checked on the CPU: every AMP config states the dtype it runs and bf16
is one override away; the mmcv ops that have no bf16 kernel (RoIAlign, multi-scale deformable attention, NMS) run
in fp32 under bf16 autocast, so the detector twins train under it (CPU autocast stands in for CUDA's: mmcv's CPU
kernels lack bf16 too); ``randomness.deterministic`` also configures cuBLAS."""
import copy
import os
import re
from pathlib import Path
from typing import Iterator, List

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.structures import InstanceData

from e2e_utils import ROOT
from mmcausal.utils.config_reading import read_config

#: the full configs (the CPU twins, ``*_shapes-*``, train without AMP)
CONFIGS = sorted(path for path in (ROOT / 'configs').glob('*/*.py') if path.parent.name != '_base_'
                 and '_shapes-' not in path.name)
STATEMENT = re.compile(r'^# AMP dtype: (fp16|bf16)\b', re.MULTILINE)
RUNS = {None: 'fp16', 'float16': 'fp16', 'bfloat16': 'bf16'}  # AmpOptimWrapper's dtype -> what autocast runs


def _chain(path: Path) -> Iterator[Path]:
    """``path`` and its local ``_base_`` files, nearest first."""
    yield path
    for base in re.findall(r"'(\.{1,2}/[^']+\.py)'", path.read_text()):
        yield from _chain((path.parent / base).resolve())


@pytest.fixture(scope='module')
def amp_configs() -> List[tuple]:
    """``(path, config)`` of every config that trains with ``AmpOptimWrapper``."""
    loaded = [(path, Config.fromfile(str(path))) for path in CONFIGS]
    return [(path, cfg) for path, cfg in loaded if cfg.get('optim_wrapper', {}).get('type') == 'AmpOptimWrapper']


def test_every_amp_config_states_the_dtype_it_runs(amp_configs):
    assert len(amp_configs) >= 30  # every family trains at least one recipe with AMP
    for path, cfg in amp_configs:
        stated = next((m.group(1) for file in _chain(path) for m in [STATEMENT.search(file.read_text())] if m), None)
        assert stated == RUNS[cfg.optim_wrapper.get('dtype')], (path.name, stated, cfg.optim_wrapper.get('dtype'))


def test_bf16_is_one_override_away(amp_configs):
    """``--cfg-options optim_wrapper.dtype=bfloat16`` (what :func:`read_config` merges) turns each into bf16 AMP and
    changes nothing else."""
    for path, cfg in amp_configs:
        bf16 = copy.deepcopy(cfg)
        bf16.merge_from_dict({'optim_wrapper.dtype': 'bfloat16'})
        assert bf16.optim_wrapper.to_dict() == {**cfg.optim_wrapper.to_dict(), 'dtype': 'bfloat16'}, path.name
    assert read_config(str(amp_configs[0][0]), {'optim_wrapper.dtype': 'bfloat16'}).optim_wrapper.dtype == 'bfloat16'


# --- mmcv ops without bf16 kernels ------------------------------------------------------------------------------
def test_roi_extractor_runs_in_fp32_under_bf16_autocast():
    """Under bf16 autocast the RoIs (corners past 512 px) and features reach RoIAlign in fp32, and the RoI features
    equal the fp32 extraction from the same bf16 features, rounded to bf16."""
    from mmdet.registry import MODELS
    init_default_scope('mmdet')
    extractor = MODELS.build(dict(type='SingleRoIExtractor', out_channels=8, featmap_strides=[4, 8, 16, 32],
                                  roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0)))
    seen = []
    for layer in extractor.roi_layers:
        layer.register_forward_pre_hook(lambda module, args: seen.append((args[0].dtype, args[1].dtype)))
    torch.manual_seed(0)
    feats = tuple(torch.randn(1, 8, 1024 // s, 1024 // s).bfloat16() for s in (4, 8, 16, 32))  # bf16 as under AMP
    rois = torch.tensor([[0., 513.3, 601.7, 700.2, 1010.9], [0., 10.4, 20.6, 50.1, 60.3], [0., 3., 5., 400., 420.]])
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = extractor(feats, rois)
    assert seen and set(seen) == {(torch.float32, torch.float32)}
    reference = extractor(tuple(f.float() for f in feats), rois)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, reference.bfloat16(), rtol=0, atol=0)


def test_deformable_attention_kernel_gets_fp32_under_bf16_autocast(monkeypatch):
    """The kernel (faked on the CPU by mmcv's PyTorch reference) receives fp32 value, sampling locations and weights
    under bf16 autocast, and the output goes on in bf16; outside autocast the inputs pass unchanged."""
    from mmcv.ops import multi_scale_deform_attn as msda
    received = []

    class Kernel:
        @staticmethod
        def ms_deform_attn_forward(value, shapes, starts, locations, weights, im2col_step):
            received.append((value.dtype, locations.dtype, weights.dtype))
            return msda.multi_scale_deformable_attn_pytorch(value, shapes, locations, weights)

    monkeypatch.setattr(msda, 'ext_module', Kernel)
    torch.manual_seed(0)
    shapes = torch.tensor([[16, 16], [8, 8]])
    value = torch.randn(1, 16 * 16 + 8 * 8, 2, 8)
    locations, weights = torch.rand(1, 5, 2, 2, 4, 2), torch.rand(1, 5, 2, 2, 4).softmax(-1)
    args = (shapes, torch.tensor([0, 256]), locations, weights, 64)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = msda.MultiScaleDeformableAttnFunction.apply(value.bfloat16(), *args)
    assert received == [(torch.float32,) * 3] and out.dtype == torch.bfloat16
    reference = msda.multi_scale_deformable_attn_pytorch(value.bfloat16().float(), shapes, locations, weights)
    torch.testing.assert_close(out, reference.bfloat16(), rtol=0, atol=0)
    msda.MultiScaleDeformableAttnFunction.apply(value.double(), *args)
    assert received[-1][0] == torch.float64


@pytest.mark.skipif(not torch.cuda.is_available(), reason='mmcv CUDA kernels need a GPU')
def test_mmcv_cuda_ops_run_under_bf16_autocast():
    """On a GPU (mmcv built with CUDA ops): RoI extraction, deformable attention forward and backward, and NMS run
    under bf16 autocast and agree with fp32 up to bf16 rounding."""
    from mmcv.ops import batched_nms
    from mmcv.ops import multi_scale_deform_attn as msda
    from mmdet.registry import MODELS
    init_default_scope('mmdet')
    torch.manual_seed(0)
    extractor = MODELS.build(dict(type='SingleRoIExtractor', out_channels=8, featmap_strides=[4, 8],
                                  roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0)))
    feats = tuple(torch.randn(1, 8, 256 // s, 256 // s, device='cuda').bfloat16() for s in (4, 8))
    rois = torch.tensor([[0., 10.3, 20.7, 200.1, 250.9], [0., 5., 5., 40., 60.]], device='cuda')
    with torch.autocast('cuda', dtype=torch.bfloat16):
        out = extractor(feats, rois)
        keep = batched_nms(rois[:, 1:], torch.tensor([0.9, 0.8], device='cuda').bfloat16(),
                           torch.tensor([0, 0], device='cuda'), dict(type='nms', iou_threshold=0.5))[1]
    torch.testing.assert_close(out, extractor(tuple(f.float() for f in feats), rois).bfloat16())
    assert keep.tolist() == [0, 1]
    shapes, starts = torch.tensor([[16, 16], [8, 8]], device='cuda'), torch.tensor([0, 256], device='cuda')
    value = torch.randn(1, 320, 2, 8, device='cuda').bfloat16().requires_grad_()
    locations = torch.rand(1, 5, 2, 2, 4, 2, device='cuda')
    weights = torch.rand(1, 5, 2, 2, 4, device='cuda').softmax(-1)
    with torch.autocast('cuda', dtype=torch.bfloat16):
        attended = msda.MultiScaleDeformableAttnFunction.apply(value, shapes, starts, locations, weights, 64)
    attended.float().sum().backward()
    reference = msda.multi_scale_deformable_attn_pytorch(value.detach().float(), shapes, locations, weights)
    assert attended.dtype == torch.bfloat16 and value.grad.dtype == torch.bfloat16
    torch.testing.assert_close(attended.float(), reference, rtol=1e-2, atol=1e-2)
    assert torch.isfinite(value.grad.float()).all()


def _detection_batch(size: int = 128) -> tuple:
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    sample = DetDataSample(metainfo=dict(img_shape=(size, size), pad_shape=(size, size), ori_shape=(size, size),
                                         scale_factor=(1., 1.), batch_input_shape=(size, size)))
    masks = np.zeros((2, size, size), np.uint8)
    masks[0, 10:70, 10:60] = masks[1, 60:120, 70:120] = 1
    sample.gt_instances = InstanceData(bboxes=torch.tensor([[10., 10., 60., 70.], [70., 60., 120., 120.]]),
                                       labels=torch.tensor([1, 2]), masks=BitmapMasks(masks, size, size))
    return torch.randn(1, 3, size, size), [sample]


@pytest.mark.parametrize('config', ['illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py',
                                    'defocus/dino-4scale_defocus-mamba-nano-p8_sfp_1xb4-45e_shapes-128px.py'])
def test_detector_twin_trains_and_predicts_under_bf16_autocast(config):
    from mmdet.registry import MODELS
    cfg = Config.fromfile(str(ROOT / 'configs' / config))
    init_default_scope('mmdet')
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()  # as the Runner does (DINO's level embeddings are uninitialised memory until then)
    inputs, samples = _detection_batch()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        total, _ = model.parse_losses(model.loss(inputs, samples))
    total.backward()
    assert torch.isfinite(total)
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
    model.eval()
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        predicted = model.predict(inputs, samples)[0].pred_instances
    assert len(predicted) > 0 and torch.isfinite(predicted.bboxes.float()).all()


# --- determinism ------------------------------------------------------------------------------------------------
@pytest.fixture
def restore_determinism():
    state = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(state[0], warn_only=state[1])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = state[2:]


@pytest.mark.parametrize('given, expected', [(None, ':4096:8'), (':16:8', ':16:8')])
def test_deterministic_randomness_configures_cublas(given, expected, monkeypatch, restore_determinism):
    """``randomness=dict(deterministic=True)`` reaches mmengine's ``set_random_seed`` (also through the exact-resume
    loops' import), which sets the cuBLAS workspace that deterministic CUDA matmuls need, keeping a given one."""
    from mmengine.runner import Runner
    if given is None:
        monkeypatch.delenv('CUBLAS_WORKSPACE_CONFIG', raising=False)
    else:
        monkeypatch.setenv('CUBLAS_WORKSPACE_CONFIG', given)
    Runner.set_randomness(Runner.__new__(Runner), seed=0, deterministic=True)
    assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
    assert os.environ['CUBLAS_WORKSPACE_CONFIG'] == expected


def test_per_iteration_reseeding_keeps_deterministic_mode(monkeypatch, restore_determinism):
    """The exact-resume loops re-seed every iteration; that must not switch deterministic algorithms off."""
    from mmengine.runner.utils import set_random_seed

    from mmcausal.engine.runner.exact_resume_loops import seed_iteration
    monkeypatch.setenv('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
    set_random_seed(0, deterministic=True)
    seed_iteration(0, 5)
    assert torch.are_deterministic_algorithms_enabled()
