"""The absolute position encodings that VisionLLaMA's Table 7(g) adds to the pyramid model (which has none):

* :class:`LearnedPositionEmbedding`: DeiT's learnable position embedding (Touvron et al. 2021, the paper's [62]),
  one table for the grid of the pre-training size, added to the tokens of the first stage; another grid gets the
  table resized bicubically (as DeiT does for a new resolution);
* :class:`PositionEncodingGenerator`: CPVT's PEG (Chu et al. 2021, the paper's [13]; Twins' ``PosConv``), a
  depthwise ``3 x 3`` convolution of the token map added to the tokens, after the first block of every stage (as
  the official pyramid code places its ``pegs``).

The released VisionLLaMA code has neither for the pyramid model (its PEG class is missing and the pyramid forward
never adds a position embedding), so both follow the cited papers.
"""
import math
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..layers import tokens_to_featmap


class LearnedPositionEmbedding(nn.Module):
    """``tokens + P`` with a learnable ``P`` of shape ``(1, h * w, D)`` for the ``(h, w)`` grid it was built for
    (trunc-normal(0.02) initialised, as DeiT); other grids get ``P`` resized bicubically."""

    def __init__(self, embed_dims: int, grid: Tuple[int, int]) -> None:
        super().__init__()
        self.grid = tuple(grid)
        self.weight = nn.Parameter(torch.zeros(1, self.grid[0] * self.grid[1], embed_dims))
        nn.init.trunc_normal_(self.weight, std=.02)

    def forward(self, tokens: Tensor, grid: Tuple[int, int]) -> Tensor:
        """``(B, H*W, D)`` tokens of an ``(H, W)`` grid -> the same plus the embedding."""
        if tuple(grid) == self.grid:
            return tokens + self.weight
        table = self.weight.reshape(1, *self.grid, -1).permute(0, 3, 1, 2)
        table = F.interpolate(table, size=tuple(grid), mode='bicubic', align_corners=False)
        return tokens + table.flatten(2).transpose(1, 2)


class PositionEncodingGenerator(nn.Module):
    """CPVT's PEG: ``tokens + DWConv3x3(map of the tokens)`` (``(B, H*W, D)`` in and out), with a bias."""

    def __init__(self, embed_dims: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(embed_dims, embed_dims, 3, padding=1, groups=embed_dims)

    def init_weights(self) -> None:
        """Twins' rule for convolutions, ``N(0, sqrt(2 / fan_out))`` with ``fan_out = 3 * 3 * D / groups = 9``,
        bias 0 (the backbone's Kaiming init would not divide by the groups)."""
        nn.init.normal_(self.proj.weight, 0., math.sqrt(2. / 9.))
        nn.init.zeros_(self.proj.bias)

    def forward(self, tokens: Tensor, grid: Tuple[int, int]) -> Tensor:
        return tokens + self.proj(tokens_to_featmap(tokens, grid)).flatten(2).transpose(1, 2)
