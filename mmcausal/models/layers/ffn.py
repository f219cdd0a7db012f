"""Feed-forward layers: SwiGLU (Shazeer 2020) with the LLaMA width rule, and the GELU MLP of ViT/CaiT.

Both modules come from upstream: mmpretrain's :class:`~mmpretrain.models.utils.SwiGLUFFN`
(``w3(silu(x W1) * (x W2))`` with ``W1, W2`` fused into ``w12``) and mmcv's
:class:`~mmcv.cnn.bricks.transformer.FFN` (``fc2(act(fc1(x)))``, keys ``layers.0.0`` / ``layers.1``; its
default ``act_cfg`` is ReLU, so a GELU MLP passes ``act_cfg=dict(type='GELU')``). Blocks use them with
``add_identity=False`` (the residual lives in the block). This file adds the SwiGLU width rule and a
gate + output projection that keeps less for backward (same arguments, keys and forward values as mmpretrain's
module).
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import FFN
from mmpretrain.models.utils import SwiGLUFFN as _UpstreamSwiGLUFFN
from torch import Tensor, nn
from torch.autograd.function import once_differentiable


class _GatedProjection(torch.autograd.Function):
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
    :class:`_GatedProjection`; under autocast in its dtype, as ``linear`` would run (the cast weight is kept)."""
    weight, bias = linear.weight, linear.bias
    device = x12.device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        x12, weight, bias = x12.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype)
    with torch.autocast(device, enabled=False):
        return _GatedProjection.apply(x12, weight, bias)


class SwiGLUFFN(_UpstreamSwiGLUFFN):
    """mmpretrain's SwiGLU FFN ``w3(silu(x W1) * (x W2))`` with the gate and ``w3`` of :func:`gated_projection`.

    ``(..., D) -> (..., out_dims)``; arguments, parameters and state-dict keys are mmpretrain's. Per token the
    backward keeps ``2h`` hidden values (the ``w12`` output) instead of autograd's ``4h``: with the
    parameter-matched width ``h = 2/3 * 4D`` that is ``5.3D``, less than the ``8D`` of a GELU MLP. With a
    ``norm_cfg`` (a norm between the gate and ``w3``) the gate is composed by autograd.
    """

    def forward(self, x: Tensor, identity: Tensor | None = None) -> Tensor:
        hidden = self.w12(x)
        # the compiler fuses the gate and plans what backward keeps itself
        if torch.compiler.is_compiling() or not isinstance(self.norm, nn.Identity):
            gate, up = hidden.chunk(2, dim=-1)
            out = self.w3(self.norm(F.silu(gate) * up))
        else:
            out = gated_projection(hidden, self.w3)
        out = self.dropout_layer(self.gamma2(out))
        if self.out_dims != self.embed_dims or not self.add_identity:
            return out
        return (x if identity is None else identity) + out


def gelu_mlp(embed_dims: int, feedforward_channels: int, approximate: str = 'none') -> FFN:
    """ViT/CaiT MLP ``fc2(GELU(fc1(x)))`` (exact erf GELU; ``approximate='tanh'`` for DiT), ``(..., D) -> (..., D)``:
    mmcv's ``FFN`` (keys ``layers.0.0`` / ``layers.1``) without its residual and with GELU instead of its ReLU
    default."""
    return FFN(embed_dims=embed_dims, feedforward_channels=feedforward_channels,
               act_cfg=dict(type='GELU', approximate=approximate), add_identity=False)


def swiglu_hidden_dims(embed_dims: int, mlp_ratio: float = 4., multiple_of: int = 256) -> int:
    """LLaMA/iLLaMA SwiGLU width: ``int(2/3 * mlp_ratio * D)`` rounded up to a multiple of ``multiple_of``.

    Keeps the parameter count of a ``mlp_ratio`` GELU MLP (e.g. D=192 -> 512, D=768 -> 2048, D=1024 -> 2816).
    """
    hidden = int(2 * mlp_ratio * embed_dims / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


__all__ = ['FFN', 'SwiGLUFFN', 'gelu_mlp', 'swiglu_hidden_dims']
