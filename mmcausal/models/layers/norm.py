"""Normalisation layers.

``RMSNorm`` (Zhang & Sennrich 2019; used by LLaMA, iLLaMA, Mamba): ``y = x / sqrt(mean(x^2) + eps) * w``.
We register :class:`RMSNorm` (torch's :class:`torch.nn.RMSNorm` with a lighter backward) so configs can say
``norm_cfg=dict(type='RMSNorm', eps=1e-6)`` next to mmcv's ``'LN'``, and build both with mmpretrain's
``build_norm_layer``.
"""
import math
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
    activation-sized tensor per norm. This backward needs one activation-sized buffer: with ``p = g * x``,
    ``dw = rstd^T p`` over the rows and ``dx = rstd g w - x rstd^3 (p w) / D`` (``p w``: one dot product per row),
    which is ``rstd * (g w - x_hat * mean(g w x_hat))`` with ``x_hat = x * rstd``.
    Differentiable once (``once_differentiable``), as the SwiGLU gate.
    """

    @staticmethod
    def forward(ctx, x: Tensor, weight: Optional[Tensor], num_dims: int, eps: float) -> Tensor:
        dims = tuple(range(-num_dims, 0))
        x32 = x.to(torch.promote_types(x.dtype, torch.float32))
        # the row norm in one pass: x.square().mean() would write an activation-sized temporary
        rstd = torch.linalg.vector_norm(x32, dim=dims, keepdim=True).square_().div_(math.prod(x.shape[-num_dims:]))
        rstd = rstd.add_(eps).rsqrt_()
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
        x32, grad32 = x.to(rstd.dtype), grad.to(rstd.dtype)
        rows, width = rstd.numel(), math.prod(x.shape[-len(ctx.dims):])
        products = grad32 * x32  # g * x, then reused for the result: one activation-sized buffer
        rows_of_products = products.reshape(rows, width)
        grad_weight = None
        with torch.autocast('cpu', enabled=False):  # a backward run under autocast keeps these products in fp32
            if weight is None:
                row_dot = rows_of_products.sum(-1)
            else:
                if ctx.needs_input_grad[1]:  # sum over rows of g * x_hat
                    grad_weight = (rstd.view(1, rows) @ rows_of_products).view(weight.shape).to(weight.dtype)
                row_dot = rows_of_products @ weight.flatten().to(rstd.dtype)
        # dx = rstd * (g w - x_hat * mean(g w x_hat)) = rstd * g w - x * rstd^3 * sum(g w x) / width
        coefficient = rstd.view(rows).pow(3).mul_(row_dot).div_(-width).view(rstd.shape)
        grad_x = grad32 if weight is None else torch.mul(grad32, weight, out=products)
        grad_x = torch.mul(grad_x, rstd, out=products).addcmul_(x32, coefficient)
        return grad_x.to(x.dtype), grad_weight, None, None


class RMSNorm(nn.RMSNorm):
    """:class:`torch.nn.RMSNorm` (same arguments and parameters, values equal up to rounding) whose backward keeps one
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
