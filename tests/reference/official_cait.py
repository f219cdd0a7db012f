"""An independent re-statement of the *official* CaiT classifier (deit ``cait_models.py``), used only as a test oracle.

Written from the official code (deit ``cait_models.py``) and the paper, never importing mmcausal: plain torch modules
with the official parameter names and order (``cls_token``, ``pos_embed``, ``patch_embed.proj``,
``blocks.i.{gamma_1, gamma_2, norm1, attn.{qkv, proj, proj_l, proj_w}, norm2, mlp.{fc1, fc2}}``,
``blocks_token_only.j.{gamma_1, gamma_2, norm1, attn.{q, k, v, proj}, norm2, mlp.{fc1, fc2}}``, ``norm``, ``head``).

- Talking-heads attention, explicit: scaled logits, ``proj_l`` over the head axis, softmax, ``proj_w`` over the
  head axis, ``@ v``, ``proj``.
- ``pos_embed`` is ``(1, N, C)`` without a class row; the class token only enters the two class-attention blocks,
  which read ``[cls, patches]`` (normalised by their own ``norm1``) and update the class token alone.
- The final ``norm`` runs over ``[cls, patches]`` and only token 0 goes to ``head``.
- The registrations use the released hyper-parameters: qkv bias, LayerNorm eps 1e-6, LayerScale init per the code.

Eval only: no dropout and no drop path (every released recipe evaluates without them).
"""
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn


class Mlp(nn.Module):
    """``fc1`` (C -> 4C), exact GELU, ``fc2`` (4C -> C)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class AttentionTalkingHead(nn.Module):
    """The official ``Attention_talking_head``: logits mixed over heads before the softmax, weights after."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads)**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.proj_l = nn.Linear(num_heads, num_heads)
        self.proj_w = nn.Linear(num_heads, num_heads)

    def forward(self, x: Tensor) -> Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]  # (B, h, N, d)
        attn = q @ k.transpose(-2, -1)  # (B, h, N, N)
        attn = self.proj_l(attn.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # mix heads: last axis = head
        attn = attn.softmax(dim=-1)
        attn = self.proj_w(attn.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class LayerScaleBlock(nn.Module):
    """The official ``LayerScale_Block``: ``x + gamma_1 * attn(norm1(x))``, then ``x + gamma_2 * mlp(norm2(x))``."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4., qkv_bias: bool = True, eps: float = 1e-6,
                 init_values: float = 1e-5) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = AttentionTalkingHead(dim, num_heads, qkv_bias=qkv_bias)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        # direct parameters come first in the state dict, as in the official files
        self.gamma_1 = nn.Parameter(init_values * torch.ones(dim))
        self.gamma_2 = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.gamma_1 * self.attn(self.norm1(x))
        return x + self.gamma_2 * self.mlp(self.norm2(x))


class ClassAttention(nn.Module):
    """The official ``Class_Attention``: the query from token 0 only, keys/values from all tokens, plain softmax."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads)**-0.5
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.k = nn.Linear(dim, dim, bias=qkv_bias)
        self.v = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, n, c = x.shape
        h, d = self.num_heads, c // self.num_heads
        q = self.q(x[:, 0]).reshape(b, 1, h, d).transpose(1, 2) * self.scale  # (B, h, 1, d)
        k = self.k(x).reshape(b, n, h, d).transpose(1, 2)
        v = self.v(x).reshape(b, n, h, d).transpose(1, 2)
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)  # (B, h, 1, N)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, 1, c))


class LayerScaleBlockCA(nn.Module):
    """The official ``LayerScale_Block_CA``: updates the class token from ``u = [cls, patches]``; FFN on cls only."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4., qkv_bias: bool = True, eps: float = 1e-6,
                 init_values: float = 1e-5) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = ClassAttention(dim, num_heads, qkv_bias=qkv_bias)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.gamma_1 = nn.Parameter(init_values * torch.ones(dim))
        self.gamma_2 = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x: Tensor, x_cls: Tensor) -> Tensor:
        u = torch.cat((x_cls, x), dim=1)
        x_cls = x_cls + self.gamma_1 * self.attn(self.norm1(u))
        return x_cls + self.gamma_2 * self.mlp(self.norm2(x_cls))


class PatchEmbed(nn.Module):
    """``proj``: Conv2d(3 -> C, kernel = stride = patch, bias), flattened to ``(B, N, C)``; no norm."""

    def __init__(self, dim: int, patch_size: int = 16, in_chans: int = 3) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch_size, patch_size)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class OfficialCaiT(nn.Module):
    """The official ``cait_models`` class with the released settings (qkv bias, LN eps 1e-6, 2 CA blocks)."""

    def __init__(self, img_size: int = 224, patch_size: int = 16, num_classes: int = 1000, embed_dim: int = 384,
                 depth: int = 24, num_heads: int = 8, mlp_ratio: float = 4., init_scale: float = 1e-5,
                 depth_token_only: int = 2, eps: float = 1e-6) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(embed_dim, patch_size)
        num_patches = (img_size // patch_size)**2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches, embed_dim))
        self.blocks = nn.ModuleList(
            LayerScaleBlock(embed_dim, num_heads, mlp_ratio, eps=eps, init_values=init_scale) for _ in range(depth))
        self.blocks_token_only = nn.ModuleList(
            LayerScaleBlockCA(embed_dim, num_heads, mlp_ratio, eps=eps, init_values=init_scale)
            for _ in range(depth_token_only))
        self.norm = nn.LayerNorm(embed_dim, eps=eps)
        self.head = nn.Linear(embed_dim, num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=.02)
        nn.init.trunc_normal_(self.cls_token, std=.02)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):  # proj_l / proj_w included: they start near zero, not at the identity
            nn.init.trunc_normal_(module.weight, std=.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward_features(self, img: Tensor) -> Tensor:
        """The class feature: ``norm([cls, patches])[:, 0]``."""
        x = self.patch_embed(img) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        cls_tokens = self.cls_token.expand(x.shape[0], -1, -1)
        for block in self.blocks_token_only:
            cls_tokens = block(x, cls_tokens)
        return self.norm(torch.cat((cls_tokens, x), dim=1))[:, 0]

    def forward_patches(self, img: Tensor) -> List[Tensor]:
        """The patch tokens ``(B, N, C)`` after every SA block (what a dense backbone uses)."""
        x = self.patch_embed(img) + self.pos_embed
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        return outs

    def forward(self, img: Tensor) -> Tensor:
        return self.head(self.forward_features(img))


#: the released registrations (``cait_models.py``): name -> (img_size, embed_dim, depth, num_heads, init_scale)
REGISTRATIONS: Dict[str, Tuple[int, int, int, int, float]] = {
    'cait_XXS24_224': (224, 192, 24, 4, 1e-5),
    'cait_XXS24': (384, 192, 24, 4, 1e-5),
    'cait_XXS36_224': (224, 192, 36, 4, 1e-5),
    'cait_XXS36': (384, 192, 36, 4, 1e-5),
    'cait_XS24': (384, 288, 24, 6, 1e-5),
    'cait_S24_224': (224, 384, 24, 8, 1e-5),
    'cait_S24': (384, 384, 24, 8, 1e-5),
    'cait_S36': (384, 384, 36, 8, 1e-6),
    'cait_M36': (384, 768, 36, 16, 1e-6),
    'cait_M48': (448, 768, 48, 16, 1e-6),
}
#: the paper's arch names (C, SA depth, heads) -> a registration with that shape
ARCH_TO_REGISTRATION = {'xxs24': 'cait_XXS24_224', 'xxs36': 'cait_XXS36_224', 'xs24': 'cait_XS24',
                        's24': 'cait_S24_224', 's36': 'cait_S36', 'm36': 'cait_M36', 'm48': 'cait_M48'}


def build_official(name: str, img_size: Optional[int] = None, num_classes: int = 1000) -> OfficialCaiT:
    """An official registration (``'cait_S24_224'``, …) or arch name (``'s24'``), optionally at another size."""
    default_size, dim, depth, heads, init_scale = REGISTRATIONS[ARCH_TO_REGISTRATION.get(name, name)]
    return OfficialCaiT(img_size=img_size or default_size, num_classes=num_classes, embed_dim=dim, depth=depth,
                        num_heads=heads, init_scale=init_scale)


def official_file(state_dict: Dict[str, Tensor]) -> dict:
    """What the official deit checkpoints hold: the weights under ``model``, every key with the DDP ``module.``."""
    return {'model': {'module.' + key: value for key, value in state_dict.items()}}


def timm_file(state_dict: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """What the timm hub copies hold: the same tensors under the clean keys, flat."""
    return dict(state_dict)


@torch.no_grad()
def randomize_(model: OfficialCaiT, seed: int = 0) -> OfficialCaiT:
    """Non-trivial weights, so that no wrong mapping can hide behind a near-zero or identity tensor.

    Linear weights of unit gain (sharp attention), biases and LayerNorm affines away from 0/1, LayerScale of
    either sign around 0.1 (the residual branches count), talking-heads mixes far from 0 and from the identity
    (and a ``proj_w`` bias, whose term grows with the key count, kept small), position/class tokens of unit size.
    """
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator)

    for name, param in model.named_parameters():
        shape = param.shape
        if name.endswith(('gamma_1', 'gamma_2')):
            param.copy_((0.05 + 0.15 * torch.rand(*shape, generator=generator)) * randn(*shape).sign())
        elif name.endswith('proj_l.weight'):
            param.copy_(randn(*shape))
        elif name.endswith('proj_w.weight'):
            param.copy_(randn(*shape) / shape[0]**0.5)
        elif name.endswith('proj_w.bias'):
            param.copy_(randn(*shape) * 2e-3)
        elif 'norm' in name and name.endswith('weight'):
            param.copy_(1 + 0.2 * randn(*shape))
        elif name.endswith('bias'):
            param.copy_(0.1 * randn(*shape))
        elif name in ('pos_embed', 'cls_token'):
            param.copy_(randn(*shape))
        elif name == 'head.weight':
            param.copy_(randn(*shape) / shape[1]**0.5)
        else:  # Linear / conv weights: unit gain
            param.copy_(randn(*shape) / shape[1:].numel()**0.5)
    return model
