"""The position context a backbone builds once per forward and hands to every block.

Blocks and token mixers never recompute where tokens sit: a :class:`TokenLayout` carries the patch grid, the
class-token position, the token order and the RoPE policy with the sequence's angle table, and memoises the
tables that only some mixers derive from them (window-local angles, the window key mask, sub-sampled key
angles), so each is built once per forward however many blocks use it.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Hashable, Optional, Tuple

import torch
from torch import Tensor

from .grid_rope import GridRoPE
from .rope import rotation_table


@dataclass(frozen=True)
class TokenLayout:
    """Where the ``(B, N(+1), D)`` tokens of one forward sit.

    Attributes:
        grid: ``(H, W)`` patch grid (``N = H * W``).
        cls_position: ``'first' | 'last' | None`` (no class token in the sequence).
        angles: RoPE angles of the sequence, ``(N(+1), hd/2)`` or per sample ``(B, N', hd/2)``; None = no RoPE.
        rope: the :class:`GridRoPE` policy that made ``angles`` (mixers derive their own tables from it).
        order: optional ``(N,)`` permutation: sequence slot ``t`` holds grid cell ``order[t]`` (raster order when
            None); outputs are put back in raster order before they become feature maps.
        image_grid: the patch grid of the image before any padding the backbone added beyond ``grid`` (e.g. to
            whole rearrangement sections); feature maps are cropped to it. None = ``grid``.
        position_scale: 1-D sequence positions are divided by it (De-focus ``rope_scale_factor``).
        decay_scale: learnable decay rates are divided by it (De-focus ``delta_scale_factor``).
    """
    grid: Tuple[int, int]
    cls_position: Optional[str] = None
    angles: Optional[Tensor] = None
    rope: Optional[GridRoPE] = None
    order: Optional[Tensor] = None
    image_grid: Optional[Tuple[int, int]] = None
    position_scale: float = 1.
    decay_scale: float = 1.
    _memo: Dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_patches(self) -> int:
        return self.grid[0] * self.grid[1]

    def memo(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """``build()`` the first time ``key`` is asked for in this forward, the same object afterwards; under
        ``torch.export`` every time (keys may hold symbolic sizes, which do not hash)."""
        if torch.compiler.is_exporting():
            return build()
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def rope_rotation(self) -> Optional[Tensor]:
        """``exp(i * angles)`` of the sequence angles, made once per forward and shared by every block (each
        block's backward then keeps the same table); None without RoPE, when the angles need a gradient
        (learnable frequencies rotate through autograd) and under ``torch.compile`` (it rotates in real arithmetic)."""
        if self.angles is None or (self.angles.requires_grad and torch.is_grad_enabled()) or \
                torch.compiler.is_compiling():
            return None
        return self.memo('rope_rotation', lambda: rotation_table(self.angles))
