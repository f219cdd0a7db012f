"""Token orders other than raster: De-focus's patch rearrangement for high-resolution dense prediction (notes B4,
the released ``PatchEmbedChangeRes``).

A large image is cut into sections of the pre-training grid (e.g. 14 x 14 patches for 224 px); the sequence visits
the sections in raster order and the patches inside each section in raster order, so every section reads like a
pre-training image (a two-level "Z", not a Morton curve). Patch ``(r, c)`` of an ``Hp x Wp`` grid with ``n_h x n_w``
sections sits at sequence index ``((r // n_h * Ws + c // n_w) * n_h + r % n_h) * n_w + c % n_w`` with
``Ws = Wp / n_w``. Positions for RoPE stay the global sequence index.
"""
from typing import Tuple

import torch
from torch import Tensor

from mmcausal.utils.errors import UserInputError


class TokenOrderError(UserInputError, ValueError):
    """A grid that the sections do not tile."""


def sectioned_order(grid: Tuple[int, int], section: Tuple[int, int], device=None) -> Tensor:
    """The sectioned order as a permutation ``(Hp * Wp,)``: sequence slot ``t`` holds raster cell ``order[t]``.

    ``tokens[:, order]`` puts raster-ordered tokens in sectioned order; ``tokens[:, order.argsort()]`` undoes it.
    The grid must be a whole number of sections (pad the image to multiples of the section size in pixels).
    """
    (height, width), (rows, cols) = grid, section
    if height % rows or width % cols:
        raise TokenOrderError(f'A {height}x{width} patch grid is not a whole number of {rows}x{cols} sections; pad '
                              'the image to a multiple of the section size (in pixels) first.')
    cells = torch.arange(height * width, device=device).view(height // rows, rows, width // cols, cols)
    return cells.permute(0, 2, 1, 3).flatten()
