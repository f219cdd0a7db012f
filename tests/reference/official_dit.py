"""An independent re-statement of the official DiT / SiT / DiT-LLaMA / SiT-LLaMA networks, used only as a test oracle.

Written from the official code (VisionLLaMA's ``dit/models.py`` and ``sit/models.py``, DiT's ``models.py``) and the
released checkpoints' keys (not from mmcausal), with the official parameter names:
``x_embedder.proj``, ``t_embedder.mlp.{0,2}``, ``y_embedder.embedding_table``, the frozen ``pos_embed`` parameter
(added by DiT/SiT, owned but unused by the LLaMA variants), ``blocks.i.{attn.qkv, attn.proj, mlp.*,
adaLN_modulation.1}`` and ``final_layer.{adaLN_modulation.1, linear}``. Attention is an explicit softmax; the LLaMA
variants rotate q and k with VisionLLaMA's square-grid integer 2-D RoPE (the same table as the plain backbone's,
:func:`reference.official_visionllama.precompute_freqs_cis_2d`). ``forward_with_cfg`` is the official one: it takes
the doubled batch ``[x; x]`` with labels ``[y; null]``, uses only the first half of ``x`` and guides channels 0-2.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from reference.official_visionllama import apply_rotary_emb, precompute_freqs_cis_2d

#: (hidden size, depth, heads) of Table 18
SIZES = {'S': (384, 12, 6), 'B': (768, 12, 12), 'L': (1024, 24, 16), 'XL': (1152, 28, 16)}


def sincos_table(dim, side):
    """DiT's fixed (side*side, dim) table in numpy fp64: first half the column, second the row, [sin | cos] each."""
    grid_w, grid_h = np.meshgrid(np.arange(side, dtype=np.float64), np.arange(side, dtype=np.float64))  # 'xy'

    def one_axis(positions):
        omega = 1. / 10000 ** (np.arange(dim // 4, dtype=np.float64) / (dim / 4.))
        angles = np.einsum('m,d->md', positions.reshape(-1), omega)
        return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)

    return np.concatenate([one_axis(grid_w), one_axis(grid_h)], axis=1)


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden, freq=256):
        super().__init__()
        self.freq = freq
        self.mlp = nn.Sequential(nn.Linear(freq, hidden), nn.SiLU(), nn.Linear(hidden, hidden))

    def forward(self, t):
        half = self.freq // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return self.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))


class LabelEmbedder(nn.Module):
    def __init__(self, num_classes, hidden, dropout):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + int(dropout > 0), hidden)

    def forward(self, labels):  # eval only: no label dropout
        return self.embedding_table(labels)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)

    def forward(self, x, freqs_cis=None):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).unbind(2)  # (B, N, heads, hd)
        if freqs_cis is not None:
            q, k = apply_rotary_emb(q, k, freqs_cis)
        q, k, v = (a.permute(0, 2, 1, 3) for a in (q, k, v))
        weights = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(dim=-1)
        return self.proj((weights @ v).permute(0, 2, 1, 3).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate='tanh'))


class LLaMAMLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        hidden = int(2 * 4 * dim / 3)
        hidden = 256 * ((hidden + 255) // 256)
        self.c_fc1 = nn.Linear(dim, hidden, bias=False)
        self.c_fc2 = nn.Linear(dim, hidden, bias=False)
        self.c_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.c_proj(F.silu(self.c_fc1(x)) * self.c_fc2(x))


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class Block(nn.Module):
    def __init__(self, dim, heads, llama):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = LLaMAMLP(dim) if llama else Mlp(dim)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim, bias=True))

    def forward(self, x, c, freqs_cis):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa), freqs_cis)
        return x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))


class FinalLayer(nn.Module):
    def __init__(self, dim, patch, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(dim, patch * patch * out_channels, bias=True)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim, bias=True))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.linear(modulate(self.norm_final(x), shift, scale))


class PatchEmbed(nn.Module):
    def __init__(self, in_channels, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, dim, patch, stride=patch, bias=True)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class OfficialDiT(nn.Module):
    """``llama``: DiT-LLaMA / SiT-LLaMA blocks (SwiGLU, RoPE, ``pos_embed`` unused); ``sit``: the forward returns only
    the first ``in_channels`` output channels (SiT's ``x, _ = x.chunk(2, 1)``)."""

    def __init__(self, input_size=32, patch_size=2, in_channels=4, hidden_size=1152, depth=28, num_heads=16,
                 class_dropout_prob=0.1, num_classes=1000, learn_sigma=True, llama=False, sit=False):
        super().__init__()
        self.in_channels, self.patch, self.heads, self.llama, self.sit = in_channels, patch_size, num_heads, llama, sit
        self.learn_sigma = learn_sigma
        self.out_channels = 2 * in_channels if learn_sigma else in_channels
        self.x_embedder = PatchEmbed(in_channels, hidden_size, patch_size)
        self.t_embedder = TimestepEmbedder(hidden_size)
        self.y_embedder = LabelEmbedder(num_classes, hidden_size, class_dropout_prob)
        side = input_size // patch_size
        self.pos_embed = nn.Parameter(torch.from_numpy(sincos_table(hidden_size, side)).float().unsqueeze(0),
                                      requires_grad=False)
        self.blocks = nn.ModuleList(Block(hidden_size, num_heads, llama) for _ in range(depth))
        self.final_layer = FinalLayer(hidden_size, patch_size, self.out_channels)

    def unpatchify(self, x):
        c, p = self.out_channels, self.patch
        h = w = int(x.shape[1] ** 0.5)
        assert h * w == x.shape[1]
        x = x.reshape(x.shape[0], h, w, p, p, c)
        return torch.einsum('nhwpqc->nchpwq', x).reshape(x.shape[0], c, h * p, h * p)

    def forward(self, x, t, y):
        x = self.x_embedder(x)
        if not self.llama:
            x = x + self.pos_embed
        freqs_cis = precompute_freqs_cis_2d(x.shape[-1] // self.heads, x.shape[1]) if self.llama else None
        c = self.t_embedder(t) + self.y_embedder(y)
        for block in self.blocks:
            x = block(x, c, freqs_cis)
        x = self.unpatchify(self.final_layer(x, c))
        if self.sit and self.learn_sigma:
            x, _ = x.chunk(2, dim=1)
        return x

    def forward_with_cfg(self, x, t, y, cfg_scale):
        half = x[: len(x) // 2]
        out = self.forward(torch.cat([half, half], dim=0), t, y)
        eps, rest = out[:, :3], out[:, 3:]
        cond_eps, uncond_eps = torch.split(eps, len(eps) // 2, dim=0)
        half_eps = uncond_eps + cfg_scale * (cond_eps - uncond_eps)
        return torch.cat([torch.cat([half_eps, half_eps], dim=0), rest], dim=1)


def build_official(name, **kwargs):
    """``'DiT-B/4'``, ``'DiT-LLaMA-B/4'``, ``'SiT-LLaMA-S/2'`` ... (the registered names of the official repos)."""
    family, size = name.rsplit('-', 1)[0], name.rsplit('-', 1)[1]
    arch, patch = size.split('/')
    hidden, depth, heads = SIZES[arch]
    options = dict(hidden_size=hidden, depth=depth, num_heads=heads, patch_size=int(patch),
                   llama=family.endswith('LLaMA'), sit=family.startswith('SiT'))
    options.update(kwargs)
    return OfficialDiT(**options)


def randomize_(model, std=0.02, seed=0):
    """Every parameter random (the official init zeroes the adaLN layers and the output, which would hide a wrong
    key map); ``pos_embed`` keeps the fixed table."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name != 'pos_embed':
                param.copy_(torch.randn(param.shape, generator=generator) * std
                            + (0.1 if name.endswith('bias') else 0.))
    return model
