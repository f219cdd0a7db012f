"""ONNX export of mmcausal models (classifiers, segmentors, bare backbones, a detector's backbone and neck, a
generator's diffusion network).

The graph is captured by ``torch.export`` (non-strict) and translated by torch's ONNX exporter (``dynamo=True``) into
standard ONNX ops at opset :data:`DEFAULT_OPSET`. Under ``torch.export`` the layers take the paths that trace: RoPE in
real arithmetic instead of complex numbers, plain compositions instead of the custom autograd Functions (their
backward-only savings mean nothing at inference), tables built from the input's (symbolic) size instead of caches.

Dynamic sizes: ``torch.export`` records every branch the Python code took on a symbolic size as a *guard*, and the
ONNX graph keeps the branch without the check. Most guards do not change the values (contiguity, broadcasting; an
equality of strides in the pyramid's window padding), so :func:`export_onnx` runs the graph in ONNX Runtime at other
batch sizes and image sizes (sides that are no multiple of the model's strides: the layers pad inside the graph, by
amounts computed from the input's size), compares it with PyTorch and refuses the export (and deletes the file),
naming a guard that fails there, when they differ. A trace treats a size of 1 apart (one window or one sub-sampled
cell per side at the traced size): such a graph is refused with the advice to trace at a larger size.

The graph's input is what ``model(inputs, mode='tensor')`` takes: the data preprocessor's output (normalised
``(B, 3, H, W)`` fp32 images); its outputs are what that call returns (classifier: pre-softmax scores ``(B,
classes)``; segmentor: logits ``(B, classes, H / s, W / s)`` at the decode head's stride ``s``), or the feature maps
of the backbone (and neck). A class-conditional generator exports its diffusion network (part ``'network'``, fixed
size): inputs ``x``, ``t``, ``y``, output ``(B, C_out, H, W)`` (:class:`NetworkOutputs`).
"""
import copy
import math
import os
import os.path as osp
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner.checkpoint import load_checkpoint
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.checkpoint_coverage import evaluation_loads
from mmcausal.utils.errors import UserInputError

#: the ONNX opset of the exported graphs (ONNX Runtime >= 1.16 runs it)
DEFAULT_OPSET = 20
#: the graph's input name
INPUT_NAME = 'images'
PARTS = ('model', 'backbone', 'features', 'network')


class ExportError(UserInputError, ValueError):
    """The model (or the requested part, size or dynamic axes) cannot be exported; the message says what to use."""


def build_export_model(cfg: Config, checkpoint: str) -> nn.Module:
    """``cfg.model`` in eval mode with ``checkpoint``'s weights, loaded as ``tools/test.py`` loads them: through
    mmcausal's safe loader, refused (``CheckpointMismatchError``) when it fits less than half of the model or none of
    a part that inference runs."""
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    model_cfg = copy.deepcopy(cfg.model)
    if cfg.get('data_preprocessor') is not None:
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = MODELS.build(model_cfg)
    with evaluation_loads():
        load_checkpoint(model, checkpoint, map_location='cpu', strict=False, logger='silent')
    return model.eval()


def _is_detector(model: nn.Module) -> bool:
    try:
        from mmdet.models.detectors import BaseDetector
    except ImportError:
        return False
    return isinstance(model, BaseDetector)


class TensorOutputs(nn.Module):
    """The exported forward: ``images`` ``(B, C, H, W)`` -> a tuple of tensors.

    ``part``: ``'model'`` (``model(images, mode='tensor')``), ``'backbone'`` (``model.backbone(images)``),
    ``'features'`` (``model.extract_feat(images)``: the backbone and neck of a detector or segmentor) or ``'module'``
    (``model(images)``: ``model`` is itself a bare backbone).
    """

    input_names = (INPUT_NAME, )

    def __init__(self, model: nn.Module, part: str) -> None:
        super().__init__()
        self.model = model
        self.part = part

    def example_inputs(self, shape: Sequence[int], generator: torch.Generator) -> Tuple[Tensor, ...]:
        """Random ``images`` of ``shape`` ``(B, C, H, W)``."""
        return (torch.randn(*shape, generator=generator), )

    def forward(self, images: Tensor) -> Tuple[Tensor, ...]:
        if self.part == 'backbone':
            outputs = self.model.backbone(images)
        elif self.part == 'features':
            outputs = self.model.extract_feat(images)
        elif self.part == 'module':
            outputs = self.model(images)
        else:
            outputs = self.model(images, mode='tensor')
        return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs, )


class NetworkOutputs(nn.Module):
    """The exported forward of a class-conditional generator's diffusion network: latents ``x`` ``(B, C, H, W)``
    fp32, times ``t`` ``(B,)`` fp32 (DiT: step indices ``0..T-1``, SiT: ``[0, 1]``) and labels ``y`` ``(B,)`` int64
    -> ``(model.network(x, t, y), )`` ``(B, C_out, H, W)``: one denoising step without guidance."""
    input_names = ('x', 't', 'y')

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor, t: Tensor, y: Tensor) -> Tuple[Tensor]:
        return (self.model.network(x, t, y), )

    def example_inputs(self, shape: Sequence[int], generator: torch.Generator) -> Tuple[Tensor, ...]:
        """Random latents of ``shape``, times in ``[0, T)`` (``T``: the objective's step count, 1 for SiT) and
        labels."""
        batch = shape[0]
        t = torch.rand(batch, generator=generator) * getattr(self.model.objective, 'num_timesteps', 1)
        y = torch.randint(self.model.network.num_classes, (batch, ), generator=generator)
        return torch.randn(*shape, generator=generator), t, y


def _is_generator(model: nn.Module) -> bool:
    from mmcausal.models.generation import ClassConditionalDiffusion
    return isinstance(model, ClassConditionalDiffusion)


def exportable_part(model: nn.Module, part: str = 'model') -> nn.Module:
    """``model`` as a :class:`TensorOutputs` module of ``part`` (:data:`PARTS`), or for ``'network'`` a generator's
    :class:`NetworkOutputs`; :class:`ExportError` for a part the model has not, a whole detector (its heads need data
    samples and box post-processing) or a whole generator (sampling is a loop of network calls on random noise)."""
    if part not in PARTS:
        raise ExportError(f'unknown part {part!r}; choose one of {list(PARTS)}.')
    name = type(model).__name__
    if _is_generator(model):
        if part != 'network':
            raise ExportError(f'{name} cannot be exported {"whole" if part == "model" else "by " + part}: it samples '
                              'with a loop of network calls on random noise; export its diffusion network (one '
                              'denoising step, inputs x, t, y) with --network.')
        return NetworkOutputs(model).eval()
    if part == 'network':
        raise ExportError(f'{name} has no diffusion network (only a ClassConditionalDiffusion has one); drop '
                          '--network.')
    if part != 'model' and not hasattr(model, 'backbone'):
        raise ExportError(f'{name} has no backbone; export the whole model.')
    if part == 'features' and not hasattr(model, 'extract_feat'):
        raise ExportError(f'{name} has no extract_feat (backbone + neck); use --backbone-only.')
    if part == 'model' and _is_detector(model):
        raise ExportError(f'{name} cannot be exported whole: its heads turn features into boxes with data samples '
                          'and post-processing (proposals, NMS) that an ONNX graph of tensors does not carry; export '
                          'its backbone and neck with --features (or the backbone with --backbone-only).')
    return TensorOutputs(model, part).eval()


def _guards(program: torch.export.ExportedProgram) -> List[str]:
    """The conditions on the input sizes under which ``program`` was traced (Python expressions over ``L``)."""
    return list(getattr(program, '_guards_code', None) or [])


def _failed_guards(guards: Sequence[str], shape: Sequence[int]) -> List[str]:
    """The guards that do not hold for an input of ``shape`` (a guard that cannot be evaluated fails)."""
    inputs = {'L': {INPUT_NAME: torch.empty(shape, device='meta')}, 'math': math, 'torch': torch}
    failed = []
    for guard in guards:
        try:
            holds = bool(eval(guard, inputs))  # noqa: S307  (torch.export's own guard expressions)
        except Exception:  # noqa: BLE001
            holds = False
        if not holds:
            failed.append(guard)
    return failed


def probe_shapes(shape: Sequence[int], dynamic: Optional[str]) -> List[Tuple[int, ...]]:
    """The input shapes to check an export at: the traced ``shape`` when nothing is ``dynamic``, else batch 1 and one
    more than traced, and with ``'all'`` a larger and a smaller non-square image with odd sides (no multiple of any
    stride: the graph pads inside)."""
    batch, channels, height, width = shape
    if dynamic is None:
        return [tuple(shape)]
    probes = [(1, channels, height, width), (batch + 1, channels, height, width)]
    if dynamic == 'all':
        odd = [side + 1 - side % 2 for side in (height + height // 4 + 3, width + width // 2 + 5, height // 2 + 1,
                                                 width // 2 + 7)]
        probes += [(batch + 1, channels, odd[0], odd[1]), (1, channels, odd[2], odd[3])]
    return probes


def check_size_independent_layers(module: nn.Module, name: str) -> None:
    """Refuse a dynamic image size for a module with adaptive pooling to a grid larger than 1 x 1 (UperNet's pyramid
    pooling): ONNX has no adaptive pooling, and the exporter writes the kernels of the traced size. The one layer of
    the exported families that keeps a graph from taking any image size (padding is computed in the graph)."""
    for layer_name, layer in getattr(module, 'model', module).named_modules():
        if isinstance(layer, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)) and layer.output_size not in (1, (1, 1)):
            raise ExportError(f'{name} cannot be exported with a dynamic image size: {layer_name} pools adaptively '
                              f'to {layer.output_size}, which ONNX writes as the kernels of the traced size (no '
                              'padding in the graph can make it take other sizes); export it with a fixed image '
                              'size (--dynamic batch).')


def check_against_pytorch(module: nn.Module, path: str, shapes: Sequence[Sequence[int]], name: str,
                          guards: Sequence[str] = (), tolerance: float = 1e-4,
                          advice: str = 'export it with a fixed image size (--dynamic batch) or without --dynamic'
                          ) -> None:
    """Run the ONNX file in ONNX Runtime and ``module`` in PyTorch on random inputs of each shape; raise
    :class:`ExportError` (ending with ``advice``) where an output differs by more than ``tolerance`` (relative to its
    largest value, at least 1), has another shape or cannot be computed, naming a ``torch.export`` guard that fails
    there when there is one.

    ``torch.export`` records every branch taken on a symbolic size as a guard that the ONNX graph does not keep, and
    most of them (contiguity, broadcasting) do not change the values: comparing the outputs is the real test."""
    generator = torch.Generator().manual_seed(0)
    for shape in shapes:
        inputs = module.example_inputs(shape, generator)
        with torch.no_grad():
            expected = module(*inputs)
        try:
            actual = onnxruntime_outputs(path, *inputs)
        except Exception as failure:  # noqa: BLE001  (ONNX Runtime's shape errors)
            found = f'ONNX Runtime: {str(failure).splitlines()[0][:200]}'
        else:
            pairs = list(zip(actual, expected))
            output_shapes = [tuple(a.shape) for a in actual], [tuple(e.shape) for e in expected]
            if output_shapes[0] != output_shapes[1]:
                found = f'output shapes {output_shapes[0]} (PyTorch: {output_shapes[1]})'
            else:
                error = max(float((a - e).abs().max()) / max(1., float(e.abs().max())) for a, e in pairs)
                if error <= tolerance:
                    continue
                found = f'max |delta| {error:.2g}'
        failed = sorted(_failed_guards(guards, shape), key=len)  # the shortest condition reads best
        reason = f'torch.export traced it under the condition {failed[0]!r}' if failed else 'it branches on the size'
        if any(guard.endswith('== 1') for guard in failed):  # a grid of one window / cell at the traced size
            advice = f'export it at a larger --shape (several windows or cells per side), or {advice}'
        raise ExportError(f'the ONNX graph of {name} does not reproduce PyTorch at input shape {tuple(shape)} '
                          f'({found}; {reason}): {advice}.')


def non_standard_ops(onnx_path: str) -> List[str]:
    """``domain::op`` of every node (and local function) of the ONNX file outside the standard ``ai.onnx`` domain."""
    import onnx
    proto = onnx.load(onnx_path, load_external_data=False)
    found = {f'{node.domain}::{node.op_type}' for node in proto.graph.node if node.domain not in ('', 'ai.onnx')}
    found |= {f'{function.domain}::{function.name}' for function in proto.functions}
    return sorted(found)


@dataclass
class OnnxExport:
    """What :func:`export_onnx` wrote: the file, its first input's shape (``None`` = dynamic axis), output names,
    opset and input names."""
    path: str
    input_shape: Tuple[Optional[int], ...]
    output_names: List[str]
    opset: int
    input_names: Tuple[str, ...] = (INPUT_NAME, )


def export_onnx(module: nn.Module, path: str, shape: Sequence[int], dynamic: Optional[str] = None,
                opset: int = DEFAULT_OPSET, optimize: bool = True, check: bool = True) -> OnnxExport:
    """Export ``module`` (a :class:`TensorOutputs` or :class:`NetworkOutputs`) to the ONNX file ``path``.

    Args:
        shape: ``(B, C, H, W)`` of the traced images or latents (random values).
        dynamic: ``None`` (every axis fixed), ``'batch'`` or ``'all'`` (batch and image size: any sides, multiples of
            the model's strides or not; trace at a size with several windows / cells per side); a
            :class:`NetworkOutputs` exports at a fixed size only.
        opset: ONNX opset (>= 18).
        optimize: let the exporter fold constants and fuse patterns (``onnxscript``'s optimizer).
        check: compare ONNX Runtime with PyTorch at :func:`probe_shapes` (see :func:`check_against_pytorch`).

    Raises:
        ExportError: a dynamic axis the graph does not allow (found by the check; a dynamic image size with adaptive
            pooling, :func:`check_size_independent_layers`), or a graph with non-standard ops.
    """
    name = type(getattr(module, 'model', module)).__name__
    if dynamic not in (None, 'batch', 'all'):
        raise ExportError(f"dynamic must be None, 'batch' or 'all', got {dynamic!r}.")
    if opset < 18:
        raise ExportError(f'--opset {opset} is too old for torch\'s ONNX exporter; use 18 or later (default '
                          f'{DEFAULT_OPSET}).')
    if dynamic is not None and isinstance(module, NetworkOutputs):
        raise ExportError(f'the diffusion network of {name} exports at a fixed size; drop --dynamic (set the latent '
                          'size with --shape H W and the batch with --batch).')
    batch, channels, height, width = shape
    dims: Dict[int, object] = {}
    if dynamic is not None:
        batch = max(batch, 2)  # a traced size of 1 would be specialised
        dims[0] = torch.export.Dim('batch', min=1)
    if dynamic == 'all':
        check_size_independent_layers(module, name)
        # any side: what the model assumes of it (a grid of more than one patch) is kept as guards, checked below
        dims[2] = dims[3] = torch.export.Dim.DYNAMIC
    example = module.example_inputs((batch, channels, height, width), torch.Generator().manual_seed(0))
    with torch.no_grad():
        try:
            program = torch.export.export(module, example, dynamic_shapes=({**dims}, ) if dims else None,
                                          strict=False)
        except torch._dynamo.exc.UserError as error:  # a constraint the model violates (e.g. a fixed size)
            raise ExportError(f'{name} cannot be exported with the dynamic axes asked for ({dynamic}): '
                              f'{str(error).splitlines()[0]}; export it with --dynamic batch or without '
                              '--dynamic.') from error
        output_names = [f'output{index}' for index in range(len(program.graph_signature.user_outputs))]
        torch.onnx.export(program, example, path, dynamo=True, opset_version=opset, optimize=optimize,
                          input_names=list(module.input_names), output_names=output_names, external_data=False,
                          verbose=False)
    foreign = non_standard_ops(path)
    if foreign:
        raise ExportError(f'the ONNX graph of {name} holds non-standard ops {foreign}; ONNX Runtime without '
                          'extensions cannot run it.')
    if check:
        try:
            advice = {} if dynamic else dict(advice='a fault of the exporter: try --no-optimize, or report it')
            check_against_pytorch(module, path, probe_shapes((batch, channels, height, width), dynamic), name,
                                  _guards(program), **advice)
        except ExportError:
            os.remove(path)  # no file that is wrong at some sizes
            raise
    input_shape = (None if 0 in dims else batch, channels, None if 2 in dims else height,
                   None if 3 in dims else width)
    return OnnxExport(osp.abspath(path), input_shape, output_names, opset, tuple(module.input_names))


def onnxruntime_outputs(path: str, *inputs: Tensor) -> List[Tensor]:
    """Run the ONNX file on ``inputs`` (``images``, or a network's ``x, t, y``, in the graph's input order) in ONNX
    Runtime (CPU) and return its outputs as tensors."""
    import onnxruntime
    session = onnxruntime.InferenceSession(path, providers=['CPUExecutionProvider'])
    feed = {graph_input.name: value.numpy() for graph_input, value in zip(session.get_inputs(), inputs)}
    return [torch.from_numpy(out) for out in session.run(None, feed)]
