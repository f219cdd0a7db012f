"""An independent re-statement of the *official* plain VisionLLaMA forward pass, used only as a test oracle.

Written from the official code (VisionLLaMA ``mmpretrain/mmpretrain/models/backbones/vision_llama.py``,
``projects/ViTDet/vitdet/vit.py``) and the MAE checkpoints' keys, not from mmcausal:

* parameter names of the official mmpretrain backbone (``patch_embed.projection``, ``layers.i.ln1``,
  ``layers.i.attn.{qkv,proj}``, ``layers.i.ln2``, ``layers.i.ffn.{w12,w3}``, final ``ln1``), plus the
  ``cls_token`` and frozen ``pos_embed`` parameters that exist but never enter the forward pass. A
  ``state_dict()`` of :class:`OfficialVisionLLaMA` therefore has the key set of the MAE checkpoints'
  ``backbone.*`` part;
* LLaMA-style complex RoPE: a ``freqs_cis`` table of unit complex numbers ``(N, hd/2)`` in the order
  ``[x_0, y_0, x_1, y_1, ...]`` over integer positions of a *square* grid (``W = int(sqrt(N))``), applied
  with ``view_as_complex`` on adjacent channel pairs of q and k only;
* pre-norm layer with drop path only on the attention branch (inactive here: the oracle is eval-only), a
  fused SwiGLU with biases whose width is ``round_up(int(ffn * 8 / 3), 256)`` with ``ffn = 4 * C``;
* no class token in the forward pass (the only working official setting, ``with_cls_token=False``);
* :class:`OfficialLLaMADET`: the ViTDet variant — window attention (window 14) in all but the global
  blocks, zero padding after ``ln1`` with **no** attention mask, a window-local 14x14 table, and the full
  integer grid in the global blocks;
* :class:`OfficialDeiTVisionLLaMA`: the supervised deit model (``deit/my_models.py``, keys of the deit
  ``checkpoint.pth``: ``patch_embed.proj``, ``cls_token``, ``blocks.i.{norm1,attn.qkv,attn.proj,gamma_1,norm2,
  mlp.c_fc1,mlp.c_fc2,mlp.c_proj,gamma_2}``, ``norm``, ``head``), written from the official model code:
  LayerScale 1e-4, a bias-free split SwiGLU, the class token rotated like flat index -1, and the Table 7
  ablation switches of the same code (``rpe_ratio``, ``share_rpe``, ``theta``, RMSNorm, GELU MLP, GAP).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def precompute_freqs_cis_2d(dim, end, theta=10000.0):
    """Complex table ``(end, dim // 2)`` for a square ``sqrt(end) x sqrt(end)`` grid of integer positions."""
    side = int(math.sqrt(end))
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 4)[: dim // 4].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    pos_x = t % side
    pos_y = torch.div(t, side, rounding_mode='floor')
    cis_x = torch.polar(torch.ones(end, dim // 4), torch.outer(pos_x, freqs))
    cis_y = torch.polar(torch.ones(end, dim // 4), torch.outer(pos_y, freqs))
    return torch.stack([cis_x, cis_y], dim=-1).reshape(end, dim // 2)


def apply_rotary_emb(xq, xk, freqs_cis):
    """``xq``/``xk`` ``(B, N, heads, hd)``; multiply adjacent-pair complex numbers by ``freqs_cis`` ``(N, hd/2)``."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class PatchEmbed(nn.Module):
    """Conv2d k=s=patch with bias, after padding the right/bottom to a multiple of the patch ('corner')."""

    def __init__(self, in_channels, dim, patch):
        super().__init__()
        self.patch = patch
        self.projection = nn.Conv2d(in_channels, dim, patch, patch, bias=True)

    def forward(self, x):
        pad_h = (self.patch - x.shape[2] % self.patch) % self.patch
        pad_w = (self.patch - x.shape[3] % self.patch) % self.patch
        if pad_h or pad_w:
            x = F.pad(x, [0, pad_w, 0, pad_h])
        x = self.projection(x)
        hw = (x.shape[2], x.shape[3])
        return x.flatten(2).transpose(1, 2), hw


class MultiheadAttentionRoPE(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)

    def forward(self, x, freqs_cis):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim)
        q, k, v = qkv.unbind(2)  # (B, N, heads, hd)
        q, k = apply_rotary_emb(q, k, freqs_cis)
        q, k, v = (t.permute(0, 2, 1, 3) for t in (q, k, v))
        attn = (q @ k.transpose(-2, -1)) * self.scale  # explicit softmax attention, no mask
        out = attn.softmax(dim=-1) @ v
        return self.proj(out.permute(0, 2, 1, 3).reshape(b, n, c))


class LLaMAMLP(nn.Module):
    """Fused SwiGLU with biases: ``w3(silu(gate) * up)`` with ``w12 = [gate; up]``."""

    def __init__(self, dim, feedforward_channels, multiple_of=256, hidden=None):
        super().__init__()
        if hidden is None:  # the official width rule; ``hidden`` overrides it (for narrow test models)
            hidden = int(feedforward_channels * 8 / 3)
            hidden = multiple_of * ((hidden + multiple_of - 1) // multiple_of)
        self.hidden = hidden
        self.w12 = nn.Linear(dim, 2 * hidden, bias=True)
        self.w3 = nn.Linear(hidden, dim, bias=True)

    def forward(self, x):
        gate, up = self.w12(x).chunk(2, dim=-1)
        return self.w3(F.silu(gate) * up)


class TransformerEncoderLayerRoPE(nn.Module):
    """Pre-norm layer. ``window_size > 0``: ViTDet window attention (pad after ``ln1``, no mask)."""

    def __init__(self, dim, heads, feedforward_channels, window_size=0, ffn_hidden=None):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = MultiheadAttentionRoPE(dim, heads)
        self.ln2 = nn.LayerNorm(dim, eps=1e-6)
        self.ffn = LLaMAMLP(dim, feedforward_channels, hidden=ffn_hidden)
        self.window_size = window_size
        self.local_cis = precompute_freqs_cis_2d(dim // heads, window_size * window_size) if window_size else None

    def forward(self, x, freqs_cis):
        if self.window_size:
            x = x + self._window_attention(self.ln1(x))
        else:
            x = x + self.attn(self.ln1(x), freqs_cis)
        return x + self.ffn(self.ln2(x))  # no drop path on the FFN branch

    def _window_attention(self, x):
        b, n, c = x.shape
        side = int(math.sqrt(n))  # the official reshape assumes a square token grid
        ws = self.window_size
        x = x.view(b, side, side, c)
        pad = (ws - side % ws) % ws
        x = F.pad(x, (0, 0, 0, pad, 0, pad))  # zeros after the norm: bias-only keys, attended to
        hp = side + pad
        nw = hp // ws
        windows = x.view(b, nw, ws, nw, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
        windows = self.attn(windows, self.local_cis)
        x = windows.view(b, nw, nw, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, hp, c)
        return x[:, :side, :side].reshape(b, n, c)


class OfficialVisionLLaMA(nn.Module):
    """Official mmpretrain ``VisionLLaMA`` with ``with_cls_token=False``, ``out_type='featmap'``.

    ``forward`` returns a tuple of ``(B, C, H, W)`` maps, one per ``out_indices`` entry (final ``ln1``
    applied to the last layer only when ``final_norm``).
    """

    def __init__(self, img_size=224, patch=16, dim=768, depth=12, heads=12, feedforward_channels=None,
                 in_channels=3, out_indices=(-1, ), final_norm=False, window_size=0, window_blocks=(),
                 ffn_hidden=None):
        super().__init__()
        feedforward_channels = feedforward_channels or 4 * dim
        num_patches = (img_size // patch) ** 2
        self.patch_embed = PatchEmbed(in_channels, dim, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim), requires_grad=False)
        self.layers = nn.ModuleList(
            TransformerEncoderLayerRoPE(dim, heads, feedforward_channels, ffn_hidden=ffn_hidden,
                                        window_size=window_size if i in window_blocks else 0)
            for i in range(depth))
        self.ln1 = nn.LayerNorm(dim, eps=1e-6)
        self.head_dim = dim // heads
        self.out_indices = [i % depth for i in out_indices]
        self.final_norm = final_norm

    def forward(self, x):
        b = x.shape[0]
        x, (h, w) = self.patch_embed(x)
        freqs_cis = precompute_freqs_cis_2d(self.head_dim, h * w)  # integer positions, square grid
        outs = []
        for i, layer in enumerate(self.layers):
            x = layer(x, freqs_cis)
            if i == len(self.layers) - 1 and self.final_norm:
                x = self.ln1(x)
            if i in self.out_indices:
                outs.append(x.reshape(b, h, w, -1).permute(0, 3, 1, 2).contiguous())
        return tuple(outs)


class OfficialLLaMADET(OfficialVisionLLaMA):
    """ViTDet variant: window 14 everywhere except ``global_blocks`` (official: 2, 5, 8, 11)."""

    def __init__(self, window_size=14, global_blocks=(2, 5, 8, 11), depth=12, **kwargs):
        window_blocks = [i for i in range(depth) if i not in global_blocks]
        super().__init__(depth=depth, window_size=window_size, window_blocks=window_blocks, **kwargs)


def randomize_(model, scale=0.1, seed=0):
    """Perturb norms and biases (and the unused tokens) so that a wrong key mapping cannot hide."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith('bias') or '.ln' in name or name.startswith(('ln1', 'cls_token', 'pos_embed')):
                param.add_(torch.randn(param.shape, generator=generator) * scale)
    return model


# ----------------------------------------------------------------------------------------------------------------
# The supervised deit model (official ``deit/my_models.py``: ``VisionLLaMA`` with ``LAMABlock``), eval only.
# ----------------------------------------------------------------------------------------------------------------
def precompute_freqs_cis_2d_deit(dim, end, theta=10000.0, use_cls=False, cls_row='trunc'):
    """The deit table ``(end(+1), dim // 2)``: flat indices ``-1?, 0 .. end-1`` on a square grid of side
    ``int(sqrt(end))``, ``x = n % side``, ``y = n // side``. The class token's index -1 gives ``x = side - 1`` and
    ``y = 0`` under the pinned torch 1.7 (tensor ``//`` truncated, ``cls_row='trunc'``) or ``-1`` (``'floor'``)."""
    side = int(end ** 0.5)
    flat = torch.arange(-1 if use_cls else 0, end)
    pos_x = (flat % side).float()
    pos_y = torch.div(flat, side, rounding_mode='trunc' if cls_row == 'trunc' else 'floor').float()
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 4)[: dim // 4].float() / dim))
    cis_x = torch.polar(torch.ones(len(flat), dim // 4), torch.outer(pos_x, freqs))
    cis_y = torch.polar(torch.ones(len(flat), dim // 4), torch.outer(pos_y, freqs))
    return torch.stack([cis_x, cis_y], dim=-1).reshape(len(flat), dim // 2)


def apply_rotary_emb_deit(xq, xk, freqs_cis):
    """``(B, N, heads, r)``; the table is ``(N, r/2)`` (shared by the heads) or ``(N, heads * r / 2)`` (one band per
    head, viewed as ``(1, N, heads, r/2)``: the official ``reshape_for_broadcast``)."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    if freqs_cis.shape[-1] == xq_.shape[-1]:
        freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    else:
        freqs_cis = freqs_cis.view(1, *xq_.shape[1:])
    return (torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq),
            torch.view_as_real(xk_ * freqs_cis).flatten(3).type_as(xk))


class DeiTPatchEmbed(nn.Module):
    def __init__(self, in_channels, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, dim, patch, patch, bias=True)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class RAttention(nn.Module):
    """timm attention with RoPE on the first ``int(rpe_ratio * head_dim)`` channels of q and k."""

    def __init__(self, dim, heads, rpe_ratio=1.0):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.rpe_ratio = rpe_ratio
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)

    def forward(self, x, freqs_cis):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 1, 3, 4)  # B N H hd
        rpe_dim = int(self.rpe_ratio * c // self.heads)
        q_rot, k_rot = apply_rotary_emb_deit(q[..., :rpe_dim], k[..., :rpe_dim], freqs_cis)
        q = torch.cat((q_rot, q[..., rpe_dim:]), dim=-1).transpose(1, 2)
        k = torch.cat((k_rot, k[..., rpe_dim:]), dim=-1).transpose(1, 2)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ v.transpose(1, 2)).transpose(1, 2).reshape(b, n, c))


class DeiTLLaMAMLP(nn.Module):
    """Bias-free SwiGLU of width ``round_up(int(2 * 4C / 3), 256)``: ``c_proj(silu(c_fc1 x) * c_fc2 x)``."""

    def __init__(self, dim):
        super().__init__()
        hidden = int(2 * 4 * dim / 3)
        hidden = hidden if hidden % 256 == 0 else hidden + 256 - hidden % 256
        self.c_fc1 = nn.Linear(dim, hidden, bias=False)
        self.c_fc2 = nn.Linear(dim, hidden, bias=False)
        self.c_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.c_proj(F.silu(self.c_fc1(x)) * self.c_fc2(x))


class GeluMlp(nn.Module):
    """timm ``Mlp``: ``fc2(GELU(fc1 x))`` with biases, hidden ``4C`` (the ablation's FFN)."""

    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class RMSNormDeit(nn.Module):
    """``x * rsqrt(mean(x^2) + eps) * weight`` (the official ``RMSNorm``)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LAMABlock(nn.Module):
    """``x + gamma_1 * attn(norm1 x)``, ``x + gamma_2 * mlp(norm2 x)``; LayerScale starts at 1e-4."""

    def __init__(self, dim, heads, norm, mlp='swiglu', rpe_ratio=1.0):
        super().__init__()
        self.norm1 = norm(dim)
        self.attn = RAttention(dim, heads, rpe_ratio)
        self.norm2 = norm(dim)
        self.mlp = DeiTLLaMAMLP(dim) if mlp == 'swiglu' else GeluMlp(dim)
        self.gamma_1 = nn.Parameter(1e-4 * torch.ones(dim))
        self.gamma_2 = nn.Parameter(1e-4 * torch.ones(dim))

    def forward(self, x, freqs_cis):
        x = x + self.gamma_1 * self.attn(self.norm1(x), freqs_cis)
        return x + self.gamma_2 * self.mlp(self.norm2(x))


class OfficialDeiTVisionLLaMA(nn.Module):
    """The supervised plain VisionLLaMA (``vit_llama_rope_{small,base,large}_patch16``) and its Table 7 ablations.

    ``forward`` returns the logits; :meth:`forward_features` the pooled feature: ``norm(x)[:, 0]`` with the class
    token, ``norm(mean(x))`` without it (the ablation's GAP). Integer positions (no auto scale), one table for the
    run's square grid; ``share_rpe=False`` builds a table ``heads`` times wider and gives each head its band.
    """

    def __init__(self, img_size=224, patch=16, dim=384, depth=12, heads=6, num_classes=1000, in_channels=3,
                 use_cls_token=True, norm='ln', mlp='swiglu', rpe_ratio=1.0, share_rpe=True, theta=10000.0,
                 cls_row='trunc'):
        super().__init__()
        norm_layer = (lambda d: nn.LayerNorm(d, eps=1e-6)) if norm == 'ln' else RMSNormDeit
        self.patch_embed = DeiTPatchEmbed(in_channels, dim, patch)
        self.num_patches = (img_size // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if use_cls_token else None
        self.blocks = nn.ModuleList(LAMABlock(dim, heads, norm_layer, mlp, rpe_ratio) for _ in range(depth))
        self.norm = norm_layer(dim)
        self.head = nn.Linear(dim, num_classes)
        table_dim = int(dim // heads * rpe_ratio) if share_rpe else int(dim * rpe_ratio)
        self.freqs_cis = precompute_freqs_cis_2d_deit(table_dim, self.num_patches, theta, use_cls_token, cls_row)

    def forward_features(self, x):
        x = self.patch_embed(x)
        if self.cls_token is not None:
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        for block in self.blocks:
            x = block(x, self.freqs_cis)
        return self.norm(x)[:, 0] if self.cls_token is not None else self.norm(x.mean(dim=1))

    def forward(self, x):
        return self.head(self.forward_features(x))
