"""Normalisation layers.

``RMSNorm`` (Zhang & Sennrich 2019; used by LLaMA, iLLaMA, Mamba): ``y = x / sqrt(mean(x^2) + eps) * w``.
We register :class:`RMSNorm` (torch's :class:`torch.nn.RMSNorm` with a lighter backward) so configs can say
``norm_cfg=dict(type='RMSNorm', eps=1e-6)`` next to mmcv's ``'LN'``, and build both with mmpretrain's
``build_norm_layer``.
"""
from typing import Optional

import torch
from mmpretrain.models.utils import build_norm_layer
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from mmcausal.registry import MODELS


class _RMSNormFunction(torch.autograd.Function):
    """``x * rsqrt(mean(x^2) + eps) * w`` over the last ``num_dims`` dims, in (at least) fp32, cast back like
    :func:`torch.nn.functional.rms_norm`, saving only ``x`` and ``rstd`` (one value per row) for backward.

    On CPU torch composes RMSNorm from elementwise ops and autograd also keeps ``x * rstd``, a second
    activation-sized tensor per norm; this backward recomputes it:
    ``dx = rstd * (g w - x_hat * mean(g w x_hat))``, ``dw = sum(g x_hat)`` with ``x_hat = x * rstd``.
    Differentiable once (``once_differentiable``), as the SwiGLU gate.
    """

    @staticmethod
    def forward(ctx, x: Tensor, weight: Optional[Tensor], num_dims: int, eps: float) -> Tensor:
        dims = tuple(range(-num_dims, 0))
        x32 = x.to(torch.promote_types(x.dtype, torch.float32))
        rstd = torch.rsqrt(x32.square().mean(dims, keepdim=True).add_(eps))
        ctx.save_for_backward(x, weight, rstd)
        ctx.dims = dims
        out = x32 * rstd
        if weight is not None:
            out.mul_(weight)
        return out.to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        x, weight, rstd = ctx.saved_tensors
        x_hat = x.to(rstd.dtype).mul(rstd)
        grad32 = grad.to(rstd.dtype)
        grad_weight = None
        if weight is not None:
            if ctx.needs_input_grad[1]:
                grad_weight = grad32 * x_hat
                if x.dim() > weight.dim():  # batched: sum over the leading dims
                    grad_weight = grad_weight.sum(tuple(range(x.dim() - weight.dim())))
                grad_weight = grad_weight.to(weight.dtype)
            grad32 = grad32 * weight
        row_mean = (grad32 * x_hat).mean(ctx.dims, keepdim=True)
        grad_x = x_hat.mul_(row_mean).neg_().add_(grad32).mul_(rstd)  # (g w - x_hat * row_mean) * rstd
        return grad_x.to(x.dtype), grad_weight, None, None


class RMSNorm(nn.RMSNorm):
    """:class:`torch.nn.RMSNorm` (same arguments, parameters and values) whose backward keeps one
    activation-sized tensor (its input) instead of two on CPU, see :class:`_RMSNormFunction`; elsewhere torch's
    fused kernel already keeps only the input and ``rstd``. ``(..., *shape)`` in and out."""

    def forward(self, x: Tensor) -> Tensor:
        if x.device.type != 'cpu':
            return super().forward(x)
        # torch's default eps: that of the computation dtype (fp32 for fp32 / half inputs, fp64 for fp64)
        eps = torch.finfo(torch.promote_types(x.dtype, torch.float32)).eps if self.eps is None else self.eps
        return _RMSNormFunction.apply(x, self.weight, len(self.normalized_shape), eps)


MODELS.register_module('RMSNorm', module=RMSNorm)

__all__ = ['RMSNorm', 'build_norm_layer']
