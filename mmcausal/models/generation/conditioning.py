"""How DiT's class-conditional network is conditioned (Peebles & Xie 2023): the timestep and class-label embeddings
that sum to the conditioning vector ``c``, and adaLN-Zero, where ``c`` shifts, scales and gates each residual branch of
a block (the modulation layers start at zero, so every block starts as the identity)."""
import math
from typing import Optional

import torch
from torch import Tensor, nn

from mmcausal.utils.validation import ConfigValueError
from ..layers import TokenLayout
from ..layers.block import ModuleFactory


def timestep_frequencies(num_channels: int, max_period: float = 10000.) -> Tensor:
    """``w_i = exp(-ln(max_period) * i / half)`` for ``i < half = num_channels // 2`` (fp32)."""
    half = num_channels // 2
    return torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)


class TimestepEmbedder(nn.Module):
    """``t`` ``(B,)`` -> ``(B, D)``: ``[cos(s t w), sin(s t w)]`` (cos first, ``freq_dim`` channels) through
    ``Linear(freq_dim, D) -> SiLU -> Linear(D, D)`` (keys ``mlp.0`` / ``mlp.2``).

    DiT feeds integer steps ``0..T-1``; SiT feeds ``t`` in ``[0, 1]`` as it is (``time_scale=1``, which leaves a
    weak time signal; a larger ``time_scale`` is an option for new models).
    """

    def __init__(self, embed_dims: int, freq_dim: int = 256, max_period: float = 10000.,
                 time_scale: float = 1.) -> None:
        super().__init__()
        if freq_dim < 2 or freq_dim % 2:
            raise ConfigValueError(f'freq_dim must be a positive even number, got {freq_dim}.')
        self.time_scale = float(time_scale)
        self.register_buffer('freqs', timestep_frequencies(freq_dim, max_period), persistent=False)
        self.mlp = nn.Sequential(nn.Linear(freq_dim, embed_dims), nn.SiLU(), nn.Linear(embed_dims, embed_dims))

    def encode(self, t: Tensor) -> Tensor:
        """The sinusoidal features ``(B, freq_dim)`` of ``t`` ``(B,)`` (fp32)."""
        angles = (t.float() * self.time_scale)[:, None] * self.freqs
        return torch.cat((angles.cos(), angles.sin()), dim=-1)

    def forward(self, t: Tensor) -> Tensor:
        features = self.encode(t)
        return self.mlp(features.to(self.mlp[0].weight.dtype))


class LabelEmbedder(nn.Module):
    """Class labels ``(B,)`` -> ``(B, D)`` from ``embedding_table``; with ``drop_prob > 0`` the table has a last row
    for the null label ``num_classes`` (classifier-free guidance), and in training each label becomes the null label
    with probability ``drop_prob``. ``force_drop`` ``(B,)`` (True / 1 = drop) overrides the random draw."""

    def __init__(self, num_classes: int, embed_dims: int, drop_prob: float = 0.1) -> None:
        super().__init__()
        if num_classes < 1:
            raise ConfigValueError(f'num_classes must be >= 1, got {num_classes}.')
        if not 0. <= drop_prob < 1.:
            raise ConfigValueError(f'class_dropout_prob must be in [0, 1), got {drop_prob}.')
        self.num_classes = num_classes
        self.drop_prob = drop_prob
        self.embedding_table = nn.Embedding(num_classes + int(drop_prob > 0), embed_dims)

    @property
    def has_null_label(self) -> bool:
        """Whether the null label ``num_classes`` exists (needed for classifier-free guidance)."""
        return self.drop_prob > 0

    def drop(self, labels: Tensor, force_drop: Optional[Tensor] = None) -> Tensor:
        """``labels`` with the dropped ones replaced by the null label."""
        if force_drop is None:
            dropped = torch.rand(labels.shape, device=labels.device) < self.drop_prob
        else:
            dropped = force_drop.bool()
        return torch.where(dropped, torch.full_like(labels, self.num_classes), labels)

    def forward(self, labels: Tensor, force_drop: Optional[Tensor] = None) -> Tensor:
        if force_drop is not None and not self.has_null_label:
            raise ConfigValueError('Dropping labels needs the null label: build the embedder with drop_prob > 0 '
                                   '(class_dropout_prob of the network).')
        if self.has_null_label and (self.training or force_drop is not None):
            labels = self.drop(labels, force_drop)
        return self.embedding_table(labels)


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
