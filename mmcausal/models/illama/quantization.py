"""Quantization-aware training (QAT) of iLLaMA's blocks (paper Sec. 4.4 and App. C.4, after Q-ViT, Li et al. 2022).

Every block's attention and FFN linear layers (``attn.qkv``, ``attn.proj``, ``ffn.w12``, ``ffn.w3``; ``fc1``/``fc2``
of a GELU MLP) become :class:`QATLinear`: the weight is fake-quantized per output channel (symmetric), the layer's
input per tensor (symmetric), both at ``bits`` bits with levels ``[-2^(bits-1), 2^(bits-1) - 1]`` and learnable step
sizes, through torch's :class:`~torch.ao.quantization._learnable_fake_quantize._LearnableFakeQuantize` (LSQ: the
straight-through rounding and the step-size gradient, scaled by ``1 / sqrt(N * Q_p)``). As in LSQ the step sizes
start from the full-precision statistics, ``s = 2 * mean(|x|) / sqrt(Q_p)`` (weights per channel, activations from
the first batch), computed at the layer's first forward, i.e. after the full-precision checkpoint is loaded.

The official QAT model (``models/doit22_quant.py`` with ``quantization/Quant.py`` of the iLLaMA repository) goes
further: its ``LinearQ`` layers (qkv, proj and the three SwiGLU linears; per-output-channel weights, LSQ steps)
quantize their inputs per input channel with ``ActQ``, an *asymmetric* quantizer with a learnable step and a
learnable zero point per channel (unsigned levels when the first batch is non-negative); the same ``ActQ``, one step
and zero point per head, also quantizes q, k, v after RoPE and the softmax attention map; and its attention adds an
RMSNorm (learnable weight) on q and on k per head before their quantizers, which the full-precision iLLaMA does not
have (close to Q-ViT's information rectification, which normalises q and k there). It has no head-wise bit-widths
and no distillation. What is here instead: every block
linear at 8 or 4 bits through torch's learnable fake quantizers, per-tensor symmetric inputs, and an exact integer
inference form. A real int8 GEMM takes one input scale per tensor (a per-input-channel scale does not factor out
of the sum over input channels) and a zero point of 0 spares it a correction term; the attention products stay in
float inside SDPA (its fused kernels have no int8 form); a q/k norm would change the architecture of the
full-precision checkpoint the QAT configs start from. The patch embedding, the norms and the head stay in full
precision, as in the official code.

Enable with the backbone argument ``qat=dict(bits=8)``; without it the model and its state dict are unchanged. With
it, each swapped layer adds ``weight_fake_quant.*`` and ``input_fake_quant.*`` keys (step size, zero point, flags):
a full-precision checkpoint loads into it with those keys missing (they are then initialised as above), and a QAT
checkpoint restores the learned steps and does not re-initialise them. After training, :func:`convert_to_int8`
turns each :class:`QATLinear` into an :class:`Int8Linear` (integer weights, inputs and GEMM) for CPU inference.
"""
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.ao.quantization import MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver
from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize
from torch.ao.quantization.fx import _decomposed  # noqa: F401  registers torch.ops.quantized_decomposed

from ..layers import BackboneConfigError, SwiGLUFFN

QAT_BITS = (4, 8)


def signed_range(bits: int) -> Tuple[int, int]:
    """``(quant_min, quant_max)`` of a signed ``bits``-bit integer: ``(-2^(bits-1), 2^(bits-1) - 1)``."""
    if bits not in QAT_BITS:
        raise BackboneConfigError(f'qat bits must be one of {QAT_BITS}, got {bits!r}.')
    return -2**(bits - 1), 2**(bits - 1) - 1


def learnable_fake_quantize(bits: int, channels: int = -1) -> _LearnableFakeQuantize:
    """A symmetric learnable-step fake quantizer: per channel (axis 0) when ``channels > 0``, else per tensor.
    The zero point stays 0 (symmetric) and is not trained; the step size is."""
    quant_min, quant_max = signed_range(bits)
    device = torch.get_default_device()
    with torch.device('cpu'):  # its constructor reads a tensor's value, which a meta-device build cannot
        fq = _build_fake_quantize(quant_min, quant_max, channels)
    fq.zero_point.requires_grad_(False)
    # ``static_enabled`` (a persistent buffer) is 1 until the LSQ initialisation of QATLinear has run
    return fq.to(device)


def _build_fake_quantize(quant_min: int, quant_max: int, channels: int) -> _LearnableFakeQuantize:
    if channels > 0:
        fq = _LearnableFakeQuantize(MovingAveragePerChannelMinMaxObserver, quant_min, quant_max,
                                    channel_len=channels, use_grad_scaling=True, dtype=torch.qint8,
                                    qscheme=torch.per_channel_symmetric, ch_axis=0)
    else:
        fq = _LearnableFakeQuantize(MovingAverageMinMaxObserver, quant_min, quant_max, use_grad_scaling=True,
                                    dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)
    return fq


def _lsq_init(fq: _LearnableFakeQuantize, x: Tensor, dims: Tuple[int, ...]) -> None:
    """LSQ's initial step ``2 * mean(|x|) / sqrt(Q_p)`` (mean over ``dims``), then the step is learned."""
    with torch.no_grad():
        step = 2 * x.detach().abs().float().mean(dim=dims) / fq.quant_max**0.5
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # every rank sees its own first batch: average, so that data-parallel replicas keep one step size
            torch.distributed.all_reduce(step)
            step /= torch.distributed.get_world_size()
        fq.scale.copy_(step.reshape(fq.scale.shape).clamp(min=fq.eps.item()))
        fq.static_enabled.fill_(0)


class QATLinear(nn.Linear):
    """``F.linear(fq_a(x), fq_w(W), b)``: an :class:`~torch.nn.Linear` (same ``weight`` / ``bias`` keys) whose input
    (per tensor) and weight (per output channel) are fake-quantized at ``bits`` bits with learnable steps."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, bits: int = 8,
                 device=None, dtype=None) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.bits = bits
        self.weight_fake_quant = learnable_fake_quantize(bits, out_features)
        self.input_fake_quant = learnable_fake_quantize(bits)

    @classmethod
    def from_linear(cls, linear: nn.Linear, bits: int) -> 'QATLinear':
        """The QAT twin of ``linear`` sharing its weight and bias parameters."""
        qat = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, bits=bits,
                  device=linear.weight.device)
        qat.weight, qat.bias = linear.weight, linear.bias
        return qat

    def quantized_weight(self) -> Tensor:
        """The fake-quantized weight (``2^bits`` levels per output channel)."""
        if self.weight_fake_quant.static_enabled[0] == 1:
            _lsq_init(self.weight_fake_quant, self.weight, (1, ))
        return self.weight_fake_quant(self.weight)

    def quantize_input(self, x: Tensor) -> Tensor:
        """The fake-quantized input (``2^bits`` levels per tensor)."""
        if self.input_fake_quant.static_enabled[0] == 1:
            _lsq_init(self.input_fake_quant, x, tuple(range(x.dim())))
        return self.input_fake_quant(x)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(self.quantize_input(x), self.quantized_weight(), self.bias)

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, bits={self.bits}'


class QATSwiGLUFFN(SwiGLUFFN):
    """:class:`SwiGLUFFN` whose ``w3`` is called as a module (so a :class:`QATLinear` quantizes it); the fused
    gated projection reads ``w3.weight`` directly and would skip the quantizers. Same parameters and keys."""

    def forward(self, x: Tensor, identity: Tensor | None = None) -> Tensor:
        gate, up = self.w12(x).chunk(2, dim=-1)
        out = self.dropout_layer(self.gamma2(self.w3(self.norm(F.silu(gate) * up))))
        if self.out_dims != self.embed_dims or not self.add_identity:
            return out
        return (x if identity is None else identity) + out


def quantize_blocks(backbone: nn.Module, bits: int = 8) -> nn.Module:
    """Swap, in place, every linear layer of each block's ``attn`` and ``ffn`` of ``backbone`` (an ILLaMA) for a
    :class:`QATLinear` at ``bits`` bits (4 or 8); the state-dict keys of the weights and biases stay the same."""
    signed_range(bits)
    for block in backbone.layers:
        for branch in (block.attn, block.ffn):
            for name, child in list(branch.named_modules()):
                if type(child) is nn.Linear:
                    parent_name, _, attr = name.rpartition('.')
                    parent = branch.get_submodule(parent_name) if parent_name else branch
                    setattr(parent, attr, QATLinear.from_linear(child, bits))
        if type(block.ffn) is SwiGLUFFN:
            block.ffn.__class__ = QATSwiGLUFFN  # same state, the forward that calls w3 as a module
    return backbone


class Int8Linear(nn.Module):
    """The integer inference form of a trained :class:`QATLinear`: ``s_x * s_w[c] * (q_x @ q_w^T)[:, c] + b[c]``
    with ``q_x`` the input quantized with the learned per-tensor step (torch's ``quantized_decomposed`` ops),
    ``q_w`` the weight stored as int8 with the learned per-channel steps and the product an int8 x int8 -> int32 GEMM
    (``torch._int_mm``), rescaled to float. This is the arithmetic the fake-quantized layer simulates, so the two
    agree up to float rounding. torch's static ``torch.ao.nn.quantized.Linear`` would also requantize the output to
    8 bits with an output step QAT never learned, and its dynamic linear would pick its own input step; neither is
    the trained model. ``bits=4`` layers are stored in int8 with values in ``[-8, 7]``."""

    def __init__(self, qat: QATLinear) -> None:
        super().__init__()
        if qat.weight_fake_quant.static_enabled[0] == 1 or qat.input_fake_quant.static_enabled[0] == 1:
            raise ValueError('convert_to_int8 needs trained (initialised) step sizes: run the QAT model first.')
        self.in_features, self.out_features, self.bits = qat.in_features, qat.out_features, qat.bits
        self.quant_min, self.quant_max = signed_range(qat.bits)
        with torch.no_grad():
            w_scale = qat.weight_fake_quant.scale.detach().float().clamp(min=qat.weight_fake_quant.eps.item())
            w_scale = w_scale.cpu()
            q_weight = torch.ops.quantized_decomposed.quantize_per_channel(
                qat.weight.detach().float().cpu(), w_scale, torch.zeros_like(w_scale, dtype=torch.long), 0,
                self.quant_min, self.quant_max, torch.int8)
            x_scale = qat.input_fake_quant.scale.detach().float().clamp(min=qat.input_fake_quant.eps.item())
        self.register_buffer('weight_t', q_weight.t().contiguous())  # (in, out) int8, the GEMM's right operand
        self.register_buffer('weight_scale', w_scale)
        self.input_scale = float(x_scale.item())
        self.register_buffer('bias', None if qat.bias is None else qat.bias.detach().float().cpu())

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        q_x = torch.ops.quantized_decomposed.quantize_per_tensor(x.float().reshape(-1, shape[-1]), self.input_scale, 0,
                                                                 self.quant_min, self.quant_max, torch.int8)
        out = torch._int_mm(q_x, self.weight_t).float() * (self.input_scale * self.weight_scale)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f'in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}'


def convert_to_int8(model: nn.Module) -> nn.Module:
    """Replace, in place, every :class:`QATLinear` of ``model`` (a trained QAT backbone or a classifier holding one)
    by its :class:`Int8Linear` for CPU inference, and put ``model`` in eval mode; returns ``model``."""
    for name, child in list(model.named_modules()):
        if isinstance(child, QATLinear):
            parent_name, _, attr = name.rpartition('.')
            setattr(model.get_submodule(parent_name) if parent_name else model, attr, Int8Linear(child))
    return model.eval()
