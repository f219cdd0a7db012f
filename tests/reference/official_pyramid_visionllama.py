"""An independent re-statement of the *official* Pyramid VisionLLaMA forward pass, used only as a test oracle.

Written from the official code (VisionLLaMA ``deit/my_models.py``, its dense copies ``twins_llama.py``) and the
released deit checkpoints' keys, not from mmcausal:

* parameter names of the released deit checkpoints (``patch_embeds.s.{proj,norm}``, ``blocks.s.j.{norm1,norm2,
  gamma_1,gamma_2}``, ``blocks.s.j.mlp.{c_fc1,c_fc2,c_proj}``, LSA ``attn.{qkv,proj}``, GSA ``attn.{q,kv,sr,norm,
  proj}``, ``norm``, ``head``) and of the dense copies (``norm_list.s``);
* complex 2D RoPE over adjacent channel pairs, table order ``[x_0, y_0, x_1, y_1, ...]``, ``w_k = 1e4^(-4k/d)``;
* LSA: zero padding after ``norm1`` to multiples of the window, **no** mask, one window-local table of integer
  positions;
* GSA: query positions ``((n // W) s, (n % W) s)``; keys from a stride-``sr`` conv (no padding) + LayerNorm at the
  released (buggy) positions ``(1 - 1/sr + sr (m // W)) s``, ``(1 - 1/sr + sr (m % W)) s`` with the *query*
  width ``W``; ``s = 14 / H`` with ``auto_scale`` (dense fine-tuning), else 1;
* SwiGLU ``c_proj(silu(c_fc1 x) * c_fc2 x)`` without biases, LayerScale ``gamma``, LayerNorm eps 1e-5;
* classifier ``head(norm(mean(norm(x))))`` (the double final norm); dense: ``norm_list[s]`` after every stage and
  NCHW maps.
Sizes must be multiples of every stride and ``sr`` (the official code fails otherwise).
"""
import torch
import torch.nn.functional as F
from torch import nn


def rope_table(positions, dim, theta=10000.0):
    """Unit complex numbers ``(N, dim // 2)`` for ``(N, 2)`` positions ``(y, x)``, order ``[x_0, y_0, ...]``."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 4)[: dim // 4].float() / dim))
    cis_x = torch.polar(torch.ones(len(positions), dim // 4), torch.outer(positions[:, 1], freqs))
    cis_y = torch.polar(torch.ones(len(positions), dim // 4), torch.outer(positions[:, 0], freqs))
    return torch.stack([cis_x, cis_y], dim=-1).reshape(len(positions), dim // 2)


def rotate(x, cis):
    """``x`` ``(B, heads, N, hd)`` times ``cis`` ``(N, hd/2)`` on adjacent channel pairs."""
    as_complex = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(as_complex * cis).flatten(-2).type_as(x)


def attention(q, k, v):
    weights = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(-1)
    return weights @ v


class MyPatchEmbed(nn.Module):
    def __init__(self, in_chans, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, patch)
        self.norm = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, x):
        x = self.proj(x)
        height, width = x.shape[-2:]
        return self.norm(x.flatten(2).transpose(1, 2)), (height, width)


class GroupAttention(nn.Module):
    """LSA."""

    def __init__(self, dim, heads, ws):
        super().__init__()
        self.heads, self.ws = heads, ws
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        side = torch.arange(ws, dtype=torch.float32)
        local = torch.stack(torch.meshgrid(side, side, indexing='ij'), -1).reshape(-1, 2)
        self.local_cis = rope_table(local, dim // heads)

    def forward(self, x, height, width):
        batch, _, dim = x.shape
        ws = self.ws
        x = x.view(batch, height, width, dim)
        pad_b, pad_r = (ws - height % ws) % ws, (ws - width % ws) % ws
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        hp, wp = height + pad_b, width + pad_r
        rows, cols = hp // ws, wp // ws
        x = x.view(batch, rows, ws, cols, ws, dim).transpose(2, 3).reshape(batch * rows * cols, ws * ws, dim)
        hd = dim // self.heads
        q, k, v = self.qkv(x).view(-1, ws * ws, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        out = attention(rotate(q, self.local_cis), rotate(k, self.local_cis), v)
        out = out.transpose(1, 2).reshape(batch, rows, cols, ws, ws, dim).transpose(2, 3).reshape(batch, hp, wp, dim)
        return self.proj(out[:, :height, :width].reshape(batch, height * width, dim))


class GSAttention(nn.Module):
    """GSA with the released key positions."""

    def __init__(self, dim, heads, sr):
        super().__init__()
        self.heads, self.sr_ratio = heads, sr
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)
        if sr > 1:
            self.sr = nn.Conv2d(dim, dim, sr, sr)
            self.norm = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, x, height, width, auto_scale=False, base_size=14):
        batch, num, dim = x.shape
        hd, sr = dim // self.heads, self.sr_ratio
        scale = base_size / height if auto_scale else 1.0
        index = torch.arange(num, dtype=torch.float32)
        q_pos = torch.stack([torch.div(index, width, rounding_mode='floor') * scale, (index % width) * scale], -1)
        num_keys = height * width // sr // sr
        m = torch.arange(num_keys, dtype=torch.float32)
        offset = 1 - 1 / sr
        k_pos = torch.stack([(offset + sr * torch.div(m, width, rounding_mode='floor')) * scale,
                             (offset + sr * (m % width)) * scale], -1)
        q = self.q(x).view(batch, num, self.heads, hd).transpose(1, 2)
        if sr > 1:
            x = self.norm(self.sr(x.transpose(1, 2).reshape(batch, dim, height, width)).flatten(2).transpose(1, 2))
        k, v = self.kv(x).view(batch, -1, 2, self.heads, hd).permute(2, 0, 3, 1, 4)
        out = attention(rotate(q, rope_table(q_pos, hd)), rotate(k, rope_table(k_pos, hd)), v)
        return self.proj(out.transpose(1, 2).reshape(batch, num, dim))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.c_fc1 = nn.Linear(dim, hidden, bias=False)
        self.c_fc2 = nn.Linear(dim, hidden, bias=False)
        self.c_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.c_proj(F.silu(self.c_fc1(x)) * self.c_fc2(x))


class GroupBlock(nn.Module):
    def __init__(self, dim, heads, hidden, ws, sr, lsa):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-5)
        self.attn = GroupAttention(dim, heads, ws) if lsa else GSAttention(dim, heads, sr)
        self.norm2 = nn.LayerNorm(dim, eps=1e-5)
        self.mlp = Mlp(dim, hidden)
        self.gamma_1 = nn.Parameter(1e-4 * torch.ones(dim))
        self.gamma_2 = nn.Parameter(1e-4 * torch.ones(dim))
        self.lsa = lsa

    def forward(self, x, height, width, auto_scale):
        extra = {} if self.lsa else dict(auto_scale=auto_scale)
        x = x + self.gamma_1 * self.attn(self.norm1(x), height, width, **extra)
        return x + self.gamma_2 * self.mlp(self.norm2(x))


ARCHS = {
    'small': ([64, 128, 256, 512], [2, 4, 8, 16], [2, 2, 10, 4], [256, 512, 768, 1536]),
    'base': ([96, 192, 384, 768], [3, 6, 12, 24], [2, 2, 18, 2], [256, 512, 1024, 2048]),
}


class OfficialPyramidVisionLLaMA(nn.Module):
    """``dense=False``: the deit classifier (``norm``, ``head``); ``dense=True``: the mmseg/mmdet backbone
    (``norm_list``, four NCHW maps, ``auto_scale`` GSA positions)."""

    def __init__(self, arch='small', num_classes=1000, dense=False, auto_scale=False):
        super().__init__()
        dims, heads, depths, hidden = ARCHS[arch]
        patches, srs = (4, 2, 2, 2), (8, 4, 2, 1)
        self.patch_embeds = nn.ModuleList(MyPatchEmbed(3 if s == 0 else dims[s - 1], dims[s], patches[s])
                                          for s in range(4))
        self.blocks = nn.ModuleList(
            nn.ModuleList(GroupBlock(dims[s], heads[s], hidden[s], 7, srs[s], lsa=j % 2 == 0) for j in range(depths[s]))
            for s in range(4))
        self.dense, self.auto_scale = dense, auto_scale
        if dense:
            self.norm_list = nn.ModuleList(nn.LayerNorm(dim, eps=1e-5) for dim in dims)
        else:
            self.norm = nn.LayerNorm(dims[-1], eps=1e-5)
            self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        batch, outs = x.shape[0], []
        for s, (embed, blocks) in enumerate(zip(self.patch_embeds, self.blocks)):
            x, (height, width) = embed(x)
            for block in blocks:
                x = block(x, height, width, self.auto_scale)
            if self.dense:
                x = self.norm_list[s](x)
                outs.append(x.transpose(1, 2).reshape(batch, -1, height, width))
            if s < 3:
                x = x.transpose(1, 2).reshape(batch, -1, height, width)
        if self.dense:
            return outs
        return self.head(self.norm(self.norm(x).mean(1)))


def randomize_(model, scale=0.1, seed=0):
    """Perturb norms, biases and LayerScale so that a wrong key mapping cannot hide."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith('bias') or 'norm' in name or 'gamma' in name:
                param.add_(torch.randn(param.shape, generator=generator) * scale)
    return model
