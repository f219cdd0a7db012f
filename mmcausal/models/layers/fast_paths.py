"""Fast paths of the shared layers: custom autograd functions that compute exactly what the modules of
:mod:`.block` and :mod:`.attention` define, keeping less for backward on CPU. Each is tested against the plain
composition of its formula (``tests/test_models/test_layers``).

* :class:`RMSNormFunction` (:class:`~.block.RMSNorm`): saves the input and one ``rstd`` per row;
* :func:`gated_projection` (:class:`~.block.SwiGLUFFN`): the SiLU gate and output projection;
* :class:`RotatedHeads` (:func:`~.attention.split_heads`): RoPE on q and k while splitting the fused projection.
"""
import math
from typing import (
    Optional,
    Tuple,
)

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from .position import complex_pairs


class RMSNormFunction(torch.autograd.Function):
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


class GatedProjection(torch.autograd.Function):
    """``linear(silu(x1) * x2, weight, bias)`` for ``x12 = [x1, x2]`` (split on the last dim), saving only ``x12``
    (and the weight) for backward.

    Plain autograd keeps ``x12``, ``silu(x1)`` and the gated product ``silu(x1) * x2`` (the projection's input):
    ``4h`` values per token. This backward recomputes both from ``x12`` (one elementwise pass, bit for bit the
    forward's values), so ``2h`` are kept: for VisionLLaMA's MAE layout (``h = 8192`` at ``D = 768``) that is
    a third of what the whole block keeps. ``d/dx1 = silu'(x1) g x2`` (torch's fused ``silu_backward``) and
    ``d/dx2 = silu(x1) g`` with ``g = grad W`` are written into one ``x12``-sized result, which also holds the
    recomputed product while the weight gradient is taken; no other activation-sized temporary (on CPU every
    fresh buffer also costs its page faults). Inputs share one dtype (:func:`gated_projection` casts them under
    autocast). Differentiable once: a second derivative (``create_graph=True``) does not pass through it.
    """

    @staticmethod
    def forward(ctx, x12: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        ctx.save_for_backward(x12, weight)
        ctx.with_bias = bias is not None
        x1, x2 = x12.chunk(2, dim=-1)
        return F.linear(F.silu(x1).mul_(x2), weight, bias)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
        x12, weight = ctx.saved_tensors
        need_x12, need_weight, need_bias = ctx.needs_input_grad
        grad = grad.reshape(-1, grad.shape[-1])
        x1, x2 = x12.reshape(-1, x12.shape[-1]).chunk(2, dim=-1)
        grad12 = torch.empty(x1.shape[0], x12.shape[-1], dtype=x12.dtype, device=x12.device)
        grad1, grad2 = grad12.chunk(2, dim=-1)
        torch.ops.aten.silu.out(x1, out=grad2)  # silu(x1), kept for d/dx2
        grad_weight = grad.t().mm(torch.mul(grad2, x2, out=grad1)) if need_weight else None
        grad_bias = grad.sum(0) if need_bias and ctx.with_bias else None
        if not need_x12:
            return None, grad_weight, grad_bias
        grad_gated = grad.mm(weight)
        grad2.mul_(grad_gated)
        torch.ops.aten.silu_backward.grad_input(grad_gated.mul_(x2), x1, grad_input=grad1)
        return grad12.view(x12.shape), grad_weight, grad_bias


def gated_projection(x12: Tensor, linear: nn.Linear) -> Tensor:
    """``linear(silu(x1) * x2)`` for ``x12 = [x1, x2]`` ``(..., 2h)`` -> ``(..., out)`` through
    :class:`GatedProjection`; under autocast in its dtype, as ``linear`` would run (the cast weight is kept)."""
    weight, bias = linear.weight, linear.bias
    device = x12.device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        x12, weight, bias = x12.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype)
    with torch.autocast(device, enabled=False):
        return GatedProjection.apply(x12, weight, bias)


class RotatedHeads(torch.autograd.Function):
    """:func:`split_heads` with RoPE as one function: q and k rotated and v copied into one new token-major
    ``(B, N, 3, heads, head_dim)`` buffer, returned as three ``(B, heads, N, head_dim)`` views. Backward rotates
    the q and k gradients back (``exp(-i a)``) and writes all three straight into one buffer of the input's shape;
    autograd's composition of the same math would stack, reshape and concatenate them (three more passes over
    ``qkv``-sized gradients per block). ``rotation``: the constant complex
    ``exp(i a)``, broadcastable to ``(B, N, heads, head_dim/2)``. Differentiable once, in ``qkv``; an unused
    output's gradient is zero."""

    @staticmethod
    def forward(ctx, qkv: Tensor, rotation: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        out = torch.empty(qkv.shape, dtype=qkv.dtype, device=qkv.device)
        rotate_pairs_into(out[:, :, 0], qkv[:, :, 0], rotation)
        rotate_pairs_into(out[:, :, 1], qkv[:, :, 1], rotation)
        out[:, :, 2].copy_(qkv[:, :, 2])
        ctx.save_for_backward(rotation)
        ctx.qkv_shape, ctx.qkv_dtype, ctx.qkv_device = qkv.shape, qkv.dtype, qkv.device
        ctx.set_materialize_grads(False)  # an unused output's gradient arrives as None: no zeros to rotate
        return tuple(out.permute(2, 0, 3, 1, 4).unbind(0))

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads: Optional[Tensor]) -> Tuple[Tensor, None]:
        rotation, = ctx.saved_tensors
        grad_qkv = torch.empty(ctx.qkv_shape, dtype=ctx.qkv_dtype, device=ctx.qkv_device)
        for index, grad in enumerate(grads):
            target = grad_qkv[:, :, index]
            if grad is None:
                target.zero_()
            elif index < 2:
                rotate_pairs_into(target, grad.transpose(1, 2), rotation.conj())
            else:
                target.copy_(grad.transpose(1, 2))
        return grad_qkv, None


def rotate_pairs_into(out: Tensor, x: Tensor, rotation: Tensor) -> None:
    """Write ``x`` ``(..., d)`` with its channel pairs multiplied by ``rotation`` (complex, broadcastable to
    ``(..., d // 2)``) into ``out`` (same shape, whole pairs in memory), without autograd. fp32/fp64 ``x`` is
    rotated straight into ``out``; lower precision goes through fp32 and is cast back."""
    if x.dtype == out.dtype and x.dtype in (torch.float32, torch.float64):
        torch.mul(complex_pairs(x), rotation, out=torch.view_as_complex(out.unflatten(-1, (-1, 2))))
    else:
        out.copy_(torch.view_as_real(complex_pairs(x.float()) * rotation).flatten(-2))
