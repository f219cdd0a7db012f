"""adaLN-Zero (DiT, Peebles & Xie 2023): a conditioning vector ``c`` shifts, scales and gates each residual branch
of a block; the modulation layers start at zero, so every block starts as the identity."""
from typing import Optional

from torch import Tensor, nn

from ..layers.block import ModuleFactory
from ..layers.context import TokenLayout


def modulate(x: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
    """``x * (1 + scale) + shift`` for tokens ``x`` ``(B, N, D)`` and per-sample ``shift``, ``scale`` ``(B, D)``."""
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def affine_free_layer_norm(embed_dims: int) -> nn.LayerNorm:
    """DiT's ``LayerNorm(D, elementwise_affine=False, eps=1e-6)``: the modulation supplies shift and scale."""
    return nn.LayerNorm(embed_dims, elementwise_affine=False, eps=1e-6)


def modulation(embed_dims: int, num_chunks: int) -> nn.Sequential:
    """``Linear(D, k D)(SiLU(c))`` (keys ``1.weight`` / ``1.bias``), zero-initialised."""
    layer = nn.Sequential(nn.SiLU(), nn.Linear(embed_dims, num_chunks * embed_dims))
    nn.init.zeros_(layer[1].weight)
    nn.init.zeros_(layer[1].bias)
    return layer


class AdaLNZeroBlock(nn.Module):
    """``x += gate_a * Mixer(mod(LN(x), shift_a, scale_a)); x += gate_f * FFN(mod(LN(x), shift_f, scale_f))``.

    ``adaLN_modulation(c)`` is split in this order: ``shift_a, scale_a, gate_a, shift_f, scale_f, gate_f`` (the
    rows of DiT's weights). Submodules ``norm1`` / ``attn`` / ``norm2`` / ``ffn`` / ``adaLN_modulation`` are the
    state-dict contract of the converter; the norms are affine-free.

    Args:
        embed_dims: token width ``D``.
        mixer: token-mixer factory; ``forward(x, layout)`` maps ``(B, N, D) -> (B, N, D)``.
        ffn: FFN factory (``forward(x)``, no residual inside).
    """

    def __init__(self, embed_dims: int, mixer: ModuleFactory, ffn: ModuleFactory) -> None:
        super().__init__()
        self.norm1 = affine_free_layer_norm(embed_dims)
        self.attn = mixer(embed_dims)
        self.norm2 = affine_free_layer_norm(embed_dims)
        self.ffn = ffn(embed_dims)
        self.adaLN_modulation = modulation(embed_dims, 6)

    def forward(self, x: Tensor, c: Tensor, layout: Optional[TokenLayout] = None) -> Tensor:
        """Tokens ``(B, N, D)`` and conditioning ``(B, D)`` -> ``(B, N, D)``."""
        shift_a, scale_a, gate_a, shift_f, scale_f, gate_f = self.adaLN_modulation(c).chunk(6, dim=-1)
        x = x + gate_a.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_a, scale_a), layout)
        return x + gate_f.unsqueeze(1) * self.ffn(modulate(self.norm2(x), shift_f, scale_f))


class AdaLNFinalLayer(nn.Module):
    """The output head of a diffusion transformer: ``linear(mod(LN(x), shift, scale))`` with
    ``[shift, scale] = adaLN_modulation(c)``; ``(B, N, D) -> (B, N, out_features)``. Modulation and ``linear``
    start at zero."""

    def __init__(self, embed_dims: int, out_features: int) -> None:
        super().__init__()
        self.norm_final = affine_free_layer_norm(embed_dims)
        self.linear = nn.Linear(embed_dims, out_features)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)
        self.adaLN_modulation = modulation(embed_dims, 2)

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=-1)
        return self.linear(modulate(self.norm_final(x), shift, scale))


__all__ = ['AdaLNFinalLayer', 'AdaLNZeroBlock', 'affine_free_layer_norm', 'modulate', 'modulation']
