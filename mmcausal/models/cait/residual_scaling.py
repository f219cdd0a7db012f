"""How CaiT's residual branches are weighted and initialised: LayerScale and the alternatives of the paper's Table 1.

Every block is ``x' = x + s1(SA(LN(x)))``, ``x'' = x' + s2(FFN(LN(x')))`` (pre-norm, Eq. 2) with one weighting ``s``
per branch (``residual_scale``):

``'layerscale'`` (Eq. 4)
    ``s(y) = diag(lambda_1 .. lambda_d) y``, every ``lambda_i`` starting at ``eps`` (mmpretrain's ``LayerScale``).
``'scalar'`` (Eq. 3 with the pre-norm put back, Fig. 1(c))
    ``s(y) = alpha y`` with one learned scalar ``alpha`` per branch: ReZero starts it at 0, Fixup and T-Fixup at 1,
    the column ``alpha = eps`` of Table 1 at LayerScale's ``eps``.
``'none'``
    ``s(y) = y`` (ViT / DeiT).

The adapted Fixup and T-Fixup of Table 1 keep LayerNorm and the warm-up (the caption) and add the scalar ``alpha``;
what else they change is the initialisation of the branches (``branch_init``), taken from the original papers
because the CaiT paper gives no formula:

``'fixup'`` (Zhang et al. 2019, Sec. 3, rules 1-2)
    With ``L`` residual branches (two per block) of ``m = 2`` weight layers each: the last layer of every branch
    (attention ``proj``, FFN ``fc2``) starts at 0, the first (``qkv``, ``fc1``) keeps its init scaled by
    ``L^(-1 / (2m - 2)) = L^(-1/2)``. Fixup's scalar biases are not added (every Linear has its own bias), and its
    zero classifier is the head's init, not the backbone's.
``'t-fixup'`` (Huang et al. 2020, encoder rules)
    Xavier-uniform ``q``, ``k``, ``v`` (each ``C x C`` part of ``qkv``), ``proj``, ``fc1``, ``fc2``, then ``v``,
    ``proj``, ``fc1`` and ``fc2`` scaled by ``0.67 N^(-1/4)`` with ``N`` the number of blocks. The input embedding
    (the patch convolution) keeps its init: T-Fixup's rule is for a token embedding table.
"""
from typing import Iterable

import torch
from mmpretrain.models.utils import LayerScale
from torch import Tensor, nn

from mmcausal.utils.validation import check_choice
from ..layers import BackboneConfigError

RESIDUAL_SCALES = ('layerscale', 'scalar', 'none')
BRANCH_INITS = ('default', 'fixup', 't-fixup')


class ScalarScale(nn.Module):
    """``y -> alpha * y`` with one learned scalar ``alpha`` (``weight``, shape ``(1,)``), initialised to
    ``init_value`` (0 for ReZero)."""

    def __init__(self, init_value: float = 0.) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.full((1, ), float(init_value)))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.weight


def residual_scale_module(kind: str, embed_dims: int, init_value: float) -> nn.Module:
    """The weighting of one residual branch: ``'layerscale'`` (``(C,)`` filled with ``init_value``; 0 disables it,
    as everywhere in mmcausal), ``'scalar'`` (one ``alpha = init_value``, 0 for ReZero) or ``'none'`` (identity)."""
    check_choice('residual_scale', kind, RESIDUAL_SCALES, BackboneConfigError)
    if kind == 'layerscale':
        return LayerScale(embed_dims, layer_scale_init_value=init_value) if init_value else nn.Identity()
    return ScalarScale(init_value) if kind == 'scalar' else nn.Identity()


def set_residual_scale(blocks: Iterable[nn.Module], kind: str, embed_dims: int, init_value: float) -> None:
    """Give both branches (``ls1``, ``ls2``) of every block the weighting ``kind``."""
    for block in blocks:
        block.ls1 = residual_scale_module(kind, embed_dims, init_value)
        block.ls2 = residual_scale_module(kind, embed_dims, init_value)


def _branch_linears(block: nn.Module):
    """``(qkv, proj, fc1, fc2)`` of one SA block."""
    return block.attn.qkv, block.attn.proj, block.ffn.layers[0][0], block.ffn.layers[1]


@torch.no_grad()
def fixup_init(blocks: Iterable[nn.Module]) -> None:
    """Fixup's rules on initialised blocks (module docstring): last layer of each branch 0, first x ``L^(-1/2)``."""
    blocks = list(blocks)
    scale = (2 * len(blocks)) ** -0.5
    for block in blocks:
        qkv, proj, fc1, fc2 = _branch_linears(block)
        qkv.weight.mul_(scale)
        fc1.weight.mul_(scale)
        proj.weight.zero_()
        fc2.weight.zero_()


@torch.no_grad()
def t_fixup_init(blocks: Iterable[nn.Module]) -> None:
    """T-Fixup's encoder rules (module docstring): Xavier-uniform, then ``v``, ``proj``, ``fc1``, ``fc2`` x
    ``0.67 N^(-1/4)``."""
    blocks = list(blocks)
    scale = 0.67 * len(blocks) ** -0.25
    for block in blocks:
        qkv, proj, fc1, fc2 = _branch_linears(block)
        for part in qkv.weight.chunk(3, dim=0):  # q, k, v: each a C x C matrix
            nn.init.xavier_uniform_(part)
        for linear in (proj, fc1, fc2):
            nn.init.xavier_uniform_(linear.weight)
        qkv.weight.chunk(3, dim=0)[2].mul_(scale)
        for linear in (proj, fc1, fc2):
            linear.weight.mul_(scale)
