"""The fast path of CaiT's talking-heads attention in training: :func:`talking_heads_fused` computes
:func:`~.talking_heads.talking_heads_explicit`'s math (the same products, in the same order) with the head mixings
as batched matrix products over the ``(B, heads, N * N)`` view (no permuted copies) and one autograd function that
keeps only q, k, v and the softmax output ``P`` and recomputes the logits ``S`` and the mixed weights ``A`` in
backward (autograd would keep ``S``, ``P``, ``A`` and the scaled q). Tested against the explicit path."""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable


def _mix_heads_flat(weight: Tensor, bias: Optional[Tensor], x: Tensor) -> Tensor:
    """``sum_g weight[h, g] x_g + bias[h]`` over the head axis of a contiguous ``(B, heads, Nq, Nk)`` tensor, as one
    batched matrix product on its ``(B, heads, Nq * Nk)`` view (no permuted copy)."""
    batch, heads = x.shape[:2]
    flat, weight = x.view(batch, heads, -1), weight.expand(batch, heads, heads)
    out = torch.bmm(weight, flat) if bias is None else torch.baddbmm(bias.view(1, heads, 1), weight, flat)
    return out.view(x.shape)


def _fused_probabilities(q: Tensor, k: Tensor, proj_l_weight: Tensor, proj_l_bias: Tensor) -> Tensor:
    """``P = softmax(Wl S + bl)`` with ``S = (s q) k^T``: ``(B, heads, Nq, Nk)``."""
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    return _mix_heads_flat(proj_l_weight, proj_l_bias, scores).softmax(dim=-1)


class _FusedTalkingHeads(torch.autograd.Function):
    """:func:`talking_heads_fused` in training: forward as the composition, backward from the saved q, k, v and
    ``P`` only (``A = Ww P + bw`` and ``S = (s q) k^T`` are recomputed, one pass and one batched product). Inputs
    share one dtype; differentiable once."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, proj_l_weight: Tensor, proj_l_bias: Tensor,
                proj_w_weight: Tensor, proj_w_bias: Tensor) -> Tensor:
        probs = _fused_probabilities(q, k, proj_l_weight, proj_l_bias)
        ctx.save_for_backward(q, k, v, probs, proj_l_weight, proj_w_weight, proj_w_bias)
        return _mix_heads_flat(proj_w_weight, proj_w_bias, probs) @ v

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
        q, k, v, probs, proj_l_weight, proj_w_weight, proj_w_bias = ctx.saved_tensors
        need_q, need_k, need_v, need_wl, need_bl, need_ww, need_bw = ctx.needs_input_grad
        batch, heads = probs.shape[:2]
        grad_v = _mix_heads_flat(proj_w_weight, proj_w_bias, probs).transpose(-2, -1) @ grad if need_v else None
        grad_weights = (grad @ v.transpose(-2, -1)).view(batch, heads, -1)  # dA
        flat_probs = probs.view(batch, heads, -1)
        grad_ww = torch.bmm(grad_weights, flat_probs.transpose(1, 2)).sum(0) if need_ww else None
        grad_bw = grad_weights.sum((0, 2)) if need_bw else None
        grad_probs = torch.bmm(proj_w_weight.t().expand(batch, heads, heads), grad_weights).view(probs.shape)
        del grad_weights
        grad_logits = torch._softmax_backward_data(grad_probs, probs, -1, probs.dtype).view(batch, heads, -1)
        del grad_probs
        scale = q.shape[-1] ** -0.5
        scaled_q = q * scale
        grad_wl = torch.bmm(grad_logits, (scaled_q @ k.transpose(-2, -1)).view(batch, heads, -1).transpose(1, 2)
                            ).sum(0) if need_wl else None
        grad_bl = grad_logits.sum((0, 2)) if need_bl else None
        grad_scores = torch.bmm(proj_l_weight.t().expand(batch, heads, heads), grad_logits).view(probs.shape)
        grad_q = (grad_scores @ k).mul_(scale) if need_q else None
        grad_k = grad_scores.transpose(-2, -1) @ scaled_q if need_k else None
        return grad_q, grad_k, grad_v, grad_wl, grad_bl, grad_ww, grad_bw


def fused_function_applies(device: str) -> bool:
    """Whether :func:`talking_heads_fused` keeps at most one ``(B, heads, N, N)`` tensor for backward: always without
    grad; with grad only through :class:`_FusedTalkingHeads`, which runs outside autocast and ``torch.compile``
    (under them the composition would keep several ``N x N`` tensors, so ``'auto'`` takes the other paths there: the
    AMP recipes at 384 px keep SDPA's ``2 h N C``)."""
    return not torch.is_grad_enabled() or not (torch.is_autocast_enabled(device) or torch.compiler.is_compiling())


def talking_heads_fused(q: Tensor, k: Tensor, v: Tensor, proj_l: nn.Linear, proj_w: nn.Linear) -> Tensor:
    """The explicit path without masks on ``(B, heads, N, d)`` q/k/v -> ``(B, heads, N, d)``, head mixings as
    batched matrix products, and in training (grad enabled, not under autocast or ``torch.compile``)
    :class:`_FusedTalkingHeads`, which keeps one ``(B, heads, N, N)`` tensor for backward (module docstring)."""
    device = q.device.type
    if torch.is_grad_enabled() and not torch.is_autocast_enabled(device) and not torch.compiler.is_compiling():
        return _FusedTalkingHeads.apply(q, k, v, proj_l.weight, proj_l.bias, proj_w.weight, proj_w.bias)
    probs = _fused_probabilities(q, k, proj_l.weight, proj_l.bias)
    return _mix_heads_flat(proj_w.weight, proj_w.bias, probs) @ v
