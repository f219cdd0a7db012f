"""mmcv's RoIAlign, multi-scale deformable attention and NMS run in fp32 under bf16 autocast.

Patches: ``MultiScaleDeformableAttnFunction.apply`` and ``NMSop.apply`` (mmcv 2.1), ``SingleRoIExtractor.forward``
(mmdet 3.3; its level mapping and RoIAlign).

Why: their CUDA (and CPU) kernels dispatch on float, double and half only, so Mask R-CNN (RoIAlign in mmdet's
``SingleRoIExtractor``) and DINO (``MultiScaleDeformableAttnFunction``) stop with "not implemented for 'BFloat16'"
under bf16 AMP; mmcv's CPU NMS needs boxes and scores of one dtype, and under autocast bf16 scores meet fp32 boxes.
mmdet also casts the RoIs to the features' dtype, which in bf16 puts box corners beyond 512 px on a 4-px grid. Under
bf16 autocast only, these run with autocast off on fp32 inputs (the projections around them stay in bf16) and hand
bf16 on; fp16 and fp32 runs are untouched.

When it can go: when the pinned mmcv has bf16 kernels for these ops. mmcv 2.1 is the last release mmdet 3.3 and
mmseg 1.2 accept, so keep it while they are pinned.
"""
import functools
from typing import Any, Callable, Optional

import torch

from .patching import is_shim, mark_shim


def _cast_floats(value: Any, dtype: torch.dtype) -> Any:
    """``value`` with every floating-point tensor in it (also inside tuples and lists) cast to ``dtype``."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(_cast_floats(item, dtype) for item in value)
    return value


def _first_tensor(values: Any) -> Optional[torch.Tensor]:
    for value in values:
        found = value if isinstance(value, torch.Tensor) else \
            _first_tensor(value) if isinstance(value, (tuple, list)) else None
        if found is not None:
            return found
    return None


def _fp32_under_bf16_autocast(func: Callable) -> Callable:
    """``func`` that, under bf16 autocast on its inputs' device, runs with autocast off on fp32 copies of its
    floating-point inputs and returns its floating-point outputs in bf16; otherwise ``func`` unchanged."""
    @functools.wraps(func)
    def in_fp32(*args: Any, **kwargs: Any) -> Any:
        tensor = _first_tensor(list(args) + list(kwargs.values()))
        device = tensor.device.type if tensor is not None else None
        if device is None or not torch.is_autocast_enabled(device) or \
                torch.get_autocast_dtype(device) != torch.bfloat16:
            return func(*args, **kwargs)
        with torch.autocast(device, enabled=False):
            out = func(*_cast_floats(args, torch.float32),
                       **{key: _cast_floats(value, torch.float32) for key, value in kwargs.items()})
        return _cast_floats(out, torch.bfloat16)

    return mark_shim(in_fp32)


def patch_ops_without_bf16() -> None:
    """Run mmcv 2.1's RoIAlign, multi-scale deformable attention and NMS in fp32 under bf16 autocast."""
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction
    from mmcv.ops.nms import NMSop
    from mmdet.models.roi_heads.roi_extractors import SingleRoIExtractor

    if not is_shim(SingleRoIExtractor.forward):
        SingleRoIExtractor.forward = _fp32_under_bf16_autocast(SingleRoIExtractor.forward)
    for function in (MultiScaleDeformableAttnFunction, NMSop):
        if not is_shim(function.apply):
            function.apply = staticmethod(_fp32_under_bf16_autocast(function.apply))
