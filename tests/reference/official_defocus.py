"""An independent re-statement of the *official* De-focus Mamba classifier, used only as a test oracle.

Written from the official code (De-focus-Attention-Networks ``classification/models/defocus_attention_network.py``,
``mamba_block.py``) and the released checkpoints' keys, not from mmcausal: official key
names (``patch_embed.proj``, ``blocks.i.norm``, ``blocks.i.mixer.{in_proj, conv1d, x_proj, dt_proj, A_log, D, freq,
out_proj}``, ``norm``, ``head``, ``head2``), the "rotate every two" RoPE with one frequency per state dim, a plain
step-by-step selective scan (``selective_scan_ref`` semantics), GroupRMS before the D skip and the gate.
"""
import torch
import torch.nn.functional as F
from torch import nn


def sequential_scan(u, delta, A, B, C):
    """h_t = exp(delta_t A) h_{t-1} + delta_t u_t B_t ; y_t = h_t C_t, one token at a time, fp32.
    u, delta: (b, L, E); A: (E, N); B, C: (b, L, N) -> y (b, L, E)."""
    u, delta, A, B, C = (x.to(torch.promote_types(x.dtype, torch.float32)) for x in (u, delta, A, B, C))
    h = u.new_zeros(u.shape[0], u.shape[2], A.shape[1])
    ys = []
    for t in range(u.shape[1]):
        h = torch.exp(delta[:, t, :, None] * A) * h + (delta[:, t] * u[:, t])[:, :, None] * B[:, t, None, :]
        ys.append((h * C[:, t, None, :]).sum(-1))
    return torch.stack(ys, dim=1)


def official_freq(n):
    return torch.tensor([(100 ** (-(i + 1) / n) - 0.01) / 0.99 for i in range(n)], dtype=torch.float32)


def rotate_every_two(x, theta):
    """out[2j] = x[2j] cos th[2j] - x[2j+1] sin th[2j]; out[2j+1] = x[2j+1] cos th[2j+1] + x[2j] sin th[2j+1]."""
    rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * theta.cos() + rotated * theta.sin()


class Mixer(nn.Module):
    def __init__(self, d, e, n=16, r=48, k=4, gn=64):
        super().__init__()
        self.n, self.r, self.gn = n, r, gn
        self.in_proj = nn.Linear(d, 2 * e, bias=False)
        self.conv1d = nn.Conv1d(e, e, k, groups=e, padding=k - 1, bias=True)
        self.x_proj = nn.Linear(e, r + 2 * n, bias=False)
        self.dt_proj = nn.Linear(r, e, bias=True)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(e, 1))
        self.D = nn.Parameter(torch.ones(e))
        self.freq = nn.Parameter(official_freq(n))
        self.out_proj = nn.Linear(e, d, bias=False)

    def forward(self, x, delta_scale=1.0, rope_scale=1.0):
        L = x.shape[1]
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = F.silu(self.conv1d(u.transpose(1, 2))[..., :L]).transpose(1, 2)
        dt, B, C = torch.split(self.x_proj(u), [self.r, self.n, self.n], dim=-1)
        theta = (torch.arange(L, dtype=torch.float32) / rope_scale)[:, None] * self.freq[None, :]
        B, C = rotate_every_two(B, theta), rotate_every_two(C, theta)
        delta = F.softplus(dt @ self.dt_proj.weight.t() + self.dt_proj.bias) / delta_scale
        y = sequential_scan(u, delta, -torch.exp(self.A_log), B, C)
        g = y.reshape(*y.shape[:-1], -1, self.gn)
        y = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + 1e-6)).reshape(y.shape)
        y = (y + self.D * u) * F.silu(z)
        return self.out_proj(y)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, d, e):
        super().__init__()
        self.norm = RMSNorm(d)
        self.mixer = Mixer(d, e)

    def forward(self, x, delta_scale, rope_scale):
        return x + self.mixer(self.norm(x), delta_scale, rope_scale)


class PatchEmbed(nn.Module):
    def __init__(self, d, p=16):
        super().__init__()
        self.proj = nn.Conv2d(3, d, p, p)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class DefocusMambaOfficial(nn.Module):
    """Official classifier: head(cls) at eval; with use_aux_loss the per-token head2 logits come first."""

    def __init__(self, d=64, depth=2, e=128, num_classes=10, mlp_head=False, delta_scale=1.0, rope_scale=1.0):
        super().__init__()
        self.delta_scale, self.rope_scale = delta_scale, rope_scale
        self.patch_embed = PatchEmbed(d)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d) * .02)
        self.blocks = nn.ModuleList(Block(d, e) for _ in range(depth))
        self.norm = nn.LayerNorm(d, eps=1e-6)
        make_head = (lambda: nn.Sequential(nn.Linear(d, 3 * d), nn.Tanh(), nn.Linear(3 * d, num_classes))) \
            if mlp_head else (lambda: nn.Linear(d, num_classes))
        self.head, self.head2 = make_head(), make_head()

    def tokens(self, x):
        x = self.patch_embed(x)
        x = torch.cat([x, self.cls_token.expand(x.shape[0], -1, -1)], dim=1)
        for block in self.blocks:
            x = block(x, self.delta_scale, self.rope_scale)
        return self.norm(x)

    def forward(self, x):
        return self.head(self.tokens(x)[:, -1])

    def aux_loss(self, x, target):
        """0.5 * [CE(head(cls)) + mean over tokens of CE(head2(x_t))] (official use_aux_loss)."""
        tokens = self.tokens(x)
        cls_loss = F.cross_entropy(self.head(tokens[:, -1]), target)
        token_logits = self.head2(tokens[:, :-1])
        token_loss = F.cross_entropy(token_logits.flatten(0, 1), target.repeat_interleave(token_logits.shape[1]))
        return 0.5 * (cls_loss + token_loss)


def sectioned_index(r, c, wp, n):
    """Sequence index of patch (r, c) under the sectioned order with n x n sections (the released detection backbone's
    ``PatchEmbedChangeRes``)."""
    ws = wp // n
    return ((r // n * ws + c // n) * n + r % n) * n + c % n

