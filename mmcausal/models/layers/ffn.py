"""Feed-forward layers: SwiGLU (Shazeer 2020) with the LLaMA width rule, and the GELU MLP of ViT/CaiT.

Both modules come from upstream: mmpretrain's :class:`~mmpretrain.models.utils.SwiGLUFFN`
(``w3(silu(x W1) * (x W2))`` with ``W1, W2`` fused into ``w12``) and mmcv's
:class:`~mmcv.cnn.bricks.transformer.FFN` (``fc2(act(fc1(x)))``, keys ``layers.0.0`` / ``layers.1``; its
default ``act_cfg`` is ReLU, so a GELU MLP passes ``act_cfg=dict(type='GELU')``). Blocks use them with
``add_identity=False`` (the residual lives in the block). This file adds the SwiGLU width rule and a
gate that keeps less for backward (same arguments, keys and forward values as mmpretrain's module).
"""
import torch
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import FFN
from mmpretrain.models.utils import SwiGLUFFN as _UpstreamSwiGLUFFN
from torch import Tensor
from torch.autograd.function import once_differentiable


class _SiLUGate(torch.autograd.Function):
    """``silu(x1) * x2`` for ``x12 = [x1, x2]`` (split on the last dim), saving only ``x12`` for backward.

    Plain autograd also keeps ``silu(x1)``; this backward recomputes it: ``d/dx1 = silu'(x1) g x2`` (torch's fused
    ``silu_backward``), ``d/dx2 = silu(x1) g``, written into one ``x12``-sized result with no other temporary
    (``g x2`` passes through the half that then takes ``d/dx2``): on CPU every fresh activation-sized buffer also
    costs its page faults.
    Differentiable once (``once_differentiable``): the gradients it returns carry no graph, so a second
    derivative (``create_graph=True``) does not pass through the gate.
    """

    @staticmethod
    def forward(ctx, x12: Tensor) -> Tensor:
        ctx.save_for_backward(x12)
        x1, x2 = x12.chunk(2, dim=-1)
        return F.silu(x1).mul_(x2)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> Tensor:
        x12, = ctx.saved_tensors
        x1, x2 = x12.chunk(2, dim=-1)
        grad12 = torch.empty_like(x12)
        grad1, grad2 = grad12.chunk(2, dim=-1)
        torch.ops.aten.silu_backward.grad_input(torch.mul(grad, x2, out=grad2), x1, grad_input=grad1)
        torch.ops.aten.silu.out(x1, out=grad2).mul_(grad)
        return grad12


class SwiGLUFFN(_UpstreamSwiGLUFFN):
    """mmpretrain's SwiGLU FFN ``w3(silu(x W1) * (x W2))`` with the gate of :class:`_SiLUGate`.

    ``(..., D) -> (..., out_dims)``; arguments, parameters and state-dict keys are mmpretrain's. Per token the
    backward keeps ``3h`` hidden values (the ``w12`` output and the ``w3`` input) instead of ``4h``: with the
    parameter-matched width ``h = 2/3 * 4D`` that is the ``8D`` of a GELU MLP.
    """

    def forward(self, x: Tensor, identity: Tensor | None = None) -> Tensor:
        hidden = self.w12(x)
        if torch.compiler.is_compiling():  # the compiler fuses the gate and plans what backward keeps itself
            gate, up = hidden.chunk(2, dim=-1)
            gated = F.silu(gate) * up
        else:
            gated = _SiLUGate.apply(hidden)
        out = self.dropout_layer(self.gamma2(self.w3(self.norm(gated))))
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
