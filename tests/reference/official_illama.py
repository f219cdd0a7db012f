"""An independent re-statement of the *official* iLLaMA forward pass, used only as a test oracle.

Written from the official code (iLLaMA ``models/illama.py``), not from mmcausal: timm key
names (``blocks.i.mlp.fc1/fc2/fc3``, ``patch_embed.proj``), LLaMA-style complex RoPE (``freqs_cis``)
over positions ``0..N`` with cls at ``N``, fp32 RMSNorm, and the post-softmax soft mask without
renormalisation. A checkpoint of this module has exactly the official key set.
"""
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def precompute_freqs_cis(dim, length, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    t = torch.arange(length, dtype=torch.float32)
    return torch.polar(torch.ones(length, dim // 2), torch.outer(t, freqs))


def rotate(x, freqs_cis):
    # x: (B, N, H, hd) -> complex pairs of adjacent channels
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3)
    return out.type_as(x)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, freqs_cis, mask):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        q, k = rotate(q, freqs_cis), rotate(k, freqs_cis)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        attn = attn * mask
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, bias=False)
        self.fc2 = nn.Linear(hidden, dim, bias=False)
        self.fc3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.fc2(nn.functional.silu(self.fc1(x)) * self.fc3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1 = RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = RMSNorm(dim)
        self.mlp = Mlp(dim, hidden)

    def forward(self, x, freqs_cis, mask):
        x = x + self.attn(self.norm1(x), freqs_cis, mask)
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class OfficialILLaMA(nn.Module):
    def __init__(self, img_size=224, patch=16, dim=192, depth=12, heads=3, num_classes=1000):
        super().__init__()
        n = (img_size // patch) ** 2
        hidden = int(2 * 4 * dim / 3)
        hidden = 256 * ((hidden + 255) // 256)
        self.patch_embed = PatchEmbed(dim, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * .02)
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * .02)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden) for _ in range(depth))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.freqs_cis = precompute_freqs_cis(dim // heads, n + 1)
        self.soft_mask_rate = 0.0

    def forward(self, img):
        x = self.patch_embed(img)
        x = torch.cat([x, self.cls_token.expand(x.shape[0], -1, -1)], dim=1) + self.pos_embed
        n = x.shape[1]
        tril = torch.tril(torch.ones(n, n))
        mask = (self.soft_mask_rate * torch.ones(n, n) + (1 - self.soft_mask_rate) * tril)[None, None]
        for blk in self.blocks:
            x = blk(x, self.freqs_cis, mask.to(x.dtype))
        return self.head(self.norm(x)[:, -1])
