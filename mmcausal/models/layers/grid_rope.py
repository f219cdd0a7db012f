"""The RoPE position policy of a backbone (:class:`GridRoPE`): token grid -> positions -> angle tables, in 1D
(sequence index), 2D (VisionLLaMA Eq. 1) or AS2D (auto-scaled onto an anchor grid, Eq. 4), with window-local and
sub-sampled key tables. The rotation itself is :mod:`mmcausal.models.layers.rope`."""
from typing import Optional, Sequence, Tuple, Union

import torch
from mmengine.utils import to_2tuple
from torch import Tensor, nn

from mmcausal.utils.validation import check_choice
from .rope import RopeConfigError, rope_angles_1d, rope_angles_2d, rope_frequencies

ROPE_MODES = ('1d', '2d', 'as2d')
AS2D_SCALINGS = ('isotropic', 'per_axis')


def check_rope_mode(rope_mode: str) -> str:
    """Return ``rope_mode`` or raise a :class:`RopeConfigError` listing the valid modes."""
    return check_choice('rope_mode', rope_mode, ROPE_MODES, RopeConfigError)


def check_as2d_scaling(scaling: str) -> str:
    """Return ``scaling`` or raise a :class:`RopeConfigError` listing :data:`AS2D_SCALINGS` (``'isotropic'`` is
    the paper's Eq. 4 and the official code)."""
    return check_choice('as2d_scaling', scaling, AS2D_SCALINGS, RopeConfigError)


def grid_positions(grid_size: Tuple[int, int], scale: Tuple[float, float] = (1., 1.),
                   device: Optional[torch.device] = None) -> Tensor:
    """Row-major 2D token positions ``(H * W, 2)`` as ``(y * scale_y, x * scale_x)``, fp32.

    Token ``n`` of an ``H x W`` grid sits at row ``y = n // W`` and column ``x = n % W``.
    """
    height, width = grid_size
    rows = torch.arange(height, device=device, dtype=torch.float32) * scale[0]
    cols = torch.arange(width, device=device, dtype=torch.float32) * scale[1]
    return torch.stack(torch.meshgrid(rows, cols, indexing='ij'), dim=-1).reshape(-1, 2)


def auto_scale(grid_size: Tuple[int, int], anchor: Tuple[int, int], scaling: str) -> Tuple[float, float]:
    """AS2DRoPE position scale ``(s_y, s_x)`` of an ``(H, W)`` grid for the anchor grid ``(B_h, B_w)``.

    * ``'isotropic'`` (VisionLLaMA Eq. 4, ``R_{i B/H, j B/H}``, and the official code, ``s = 224 / H_px``):
      one scale ``s = B_h / H`` from the height for both axes, so the aspect ratio of the grid is kept and
      the rows span the anchor's range ``[0, B_h)``.
    * ``'per_axis'``: ``(B_h / H, B_w / W)``, so both axes span the anchor's range (a non-square grid is
      squeezed onto the anchor's shape).

    For a square grid and anchor both give ``B / H``; at ``H x W = B_h x B_w`` the scale is 1 and
    AS2DRoPE is exactly 2D RoPE.
    """
    if check_as2d_scaling(scaling) == 'isotropic':
        return anchor[0] / grid_size[0], anchor[0] / grid_size[0]
    return anchor[0] / grid_size[0], anchor[1] / grid_size[1]


CLS_ROPE_MODES = ('identity', 'legacy_trunc', 'legacy_floor')
GSA_KEY_POSITIONS = ('fixed', 'official')


class GridRoPE(nn.Module):
    """The RoPE position policy of a backbone: token grid -> angle tables for every kind of mixer.

    One module per backbone (or per pyramid stage) owns the choices that turn a patch grid into positions:

    * ``mode``: ``'1d'`` (flat sequence index ``t``, LLaMA/iLLaMA/De-focus), ``'2d'`` (integer ``(row, col)``,
      VisionLLaMA Eq. 1) or ``'as2d'`` (``(row, col)`` auto-scaled onto the ``anchor`` grid, VisionLLaMA Eq. 4);
    * ``as2d_scaling``: ``'isotropic'`` (Eq. 4 and the official code) or ``'per_axis'``, see :func:`auto_scale`;
    * the class-token rotation (``cls_rope``) in the 2D modes; in ``'1d'`` the class token is the sequence index
      it sits at (``0`` first, ``N`` last);
    * window-local tables (:meth:`window_angles`, ViTDet / pyramid LSA) and sub-sampled key tables
      (:meth:`subsampled_key_angles`, pyramid GSA).

    Tables are computed from the actual grid at every call (fp32, never cached across forwards); a
    :class:`~mmcausal.models.layers.TokenLayout` memoises them within one forward. The frequency ladders are
    non-persistent buffers (no state-dict keys). Learnable frequencies (De-focus) are
    :class:`~mmcausal.models.backbones.defocus.LearnableRoPE`, inside the mixers.

    Args:
        head_dim: channels per head (even; a multiple of 4 for the 2D modes).
        mode: ``'1d' | '2d' | 'as2d'``; settable at run time (the resolution tool switches it).
        anchor: AS2DRoPE anchor grid ``(B_h, B_w)`` in tokens (int or pair).
        as2d_scaling: ``'per_axis' | 'isotropic'``.
        cls_rope: class-token rotation in 2D: ``'identity'`` (angle 0) or the official deit quirk of rotating it
            like flat index -1, i.e. column ``W - 1`` and row ``0`` (``'legacy_trunc'``) or ``-1`` (``'legacy_floor'``).
        theta: frequency base.
        requires_2d: the backbone's mixers need 2D positions (windows, GSA): refuse ``mode='1d'``.
    """

    def __init__(self, head_dim: int, mode: str = 'as2d', anchor: Union[int, Sequence[int]] = 14,
                 as2d_scaling: str = 'per_axis', cls_rope: str = 'identity', theta: float = 10000.,
                 requires_2d: bool = False) -> None:
        super().__init__()
        if head_dim % 2:
            raise RopeConfigError(f'RoPE needs an even head_dim, got {head_dim}.')
        self.head_dim = head_dim
        self.requires_2d = requires_2d
        self.register_buffer('freqs_1d', rope_frequencies(head_dim // 2, theta), persistent=False)
        self.register_buffer('freqs_2d', rope_frequencies(head_dim // 4, theta), persistent=False)
        self.mode = mode
        self.anchor = anchor
        self.as2d_scaling = as2d_scaling
        self.cls_rope = check_choice('cls_rope', cls_rope, CLS_ROPE_MODES, RopeConfigError)

    # ------------------------------------------------------------------ policy
    @property
    def mode(self) -> str:
        """``'1d' | '2d' | 'as2d'``; switchable at run time (it only changes the angle tables)."""
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        check_rope_mode(mode)
        if mode != '1d' and self.head_dim % 4:
            raise RopeConfigError(f'2D RoPE needs head_dim divisible by 4, got {self.head_dim}; use mode="1d".')
        if mode == '1d' and self.requires_2d:
            raise RopeConfigError('Windowed / sub-sampled attention needs 2D positions; use rope_mode="2d" or "as2d".')
        self._mode = mode

    @property
    def anchor(self) -> Tuple[int, int]:
        """AS2DRoPE anchor grid ``(B_h, B_w)`` in tokens."""
        return self._anchor

    @anchor.setter
    def anchor(self, anchor: Union[int, Sequence[int]]) -> None:
        anchor = tuple(int(side) for side in to_2tuple(anchor))
        if len(anchor) != 2 or min(anchor) <= 0:
            raise RopeConfigError(f'rope_anchor must be a positive int or (H, W) pair (tokens per side), got {anchor}.')
        self._anchor = anchor

    @property
    def as2d_scaling(self) -> str:
        """``'isotropic' | 'per_axis'``: how AS2DRoPE scales a grid onto the anchor; switchable at run time."""
        return self._as2d_scaling

    @as2d_scaling.setter
    def as2d_scaling(self, scaling: str) -> None:
        self._as2d_scaling = check_as2d_scaling(scaling)

    # ------------------------------------------------------------------ positions
    def scale(self, grid: Tuple[int, int]) -> Tuple[float, float]:
        """Position scale ``(s_y, s_x)`` of a ``(H, W)`` grid: AS2DRoPE in ``'as2d'``, else ``(1, 1)``."""
        return auto_scale(grid, self.anchor, self.as2d_scaling) if self.mode == 'as2d' else (1., 1.)

    def patch_positions(self, grid: Tuple[int, int], cls_position: Optional[str] = None,
                        device: Optional[torch.device] = None) -> Tensor:
        """Positions of the patch tokens: ``(H*W, 2)`` scaled ``(y, x)``, or ``(H*W,)`` sequence indices in
        ``'1d'`` (starting at 1 after a leading class token)."""
        num_patches = grid[0] * grid[1]
        if self.mode == '1d':
            first = 1 if cls_position == 'first' else 0
            return torch.arange(first, first + num_patches, device=device, dtype=torch.float32)
        return grid_positions(grid, self.scale(grid), device=device)

    def cls_token_position(self, grid: Tuple[int, int], cls_position: str,
                           device: Optional[torch.device] = None) -> Tensor:
        """Position of the class token: ``(1, 2)``, or ``(1,)`` in ``'1d'`` (its sequence index)."""
        if self.mode == '1d':  # an arange, not a float of the grid: the grid may be symbolic (torch.export)
            index = 0 if cls_position == 'first' else grid[0] * grid[1]
            return torch.arange(index, index + 1, device=device, dtype=torch.float32)
        if self.cls_rope == 'identity':
            return torch.zeros(1, 2, device=device)
        # made on the device from an arange (no host-to-device copy every forward; the grid may be symbolic)
        last_column = torch.arange(grid[1] - 1, grid[1], device=device, dtype=torch.float32)
        row = torch.full_like(last_column, 0. if self.cls_rope == 'legacy_trunc' else -1.)
        scale_y, scale_x = self.scale(grid)
        return torch.stack((row * scale_y, last_column * scale_x), dim=-1)

    def angles(self, positions: Tensor) -> Tensor:
        """Positions ``(..., N)`` (1D) or ``(..., N, 2)`` (2D) -> angles ``(..., N, head_dim/2)`` fp32."""
        if self.mode == '1d':
            return rope_angles_1d(positions, self.freqs_1d)
        return rope_angles_2d(positions, self.freqs_2d)

    def sequence_angles(self, grid: Tuple[int, int], cls_position: Optional[str] = None,
                        device: Optional[torch.device] = None, keep: Optional[Tensor] = None) -> Tensor:
        """Angles of the whole sequence (patches in raster order, class token first/last/none).

        Args:
            grid: ``(H, W)`` patch grid.
            cls_position: ``'first' | 'last' | None``.
            keep: optional ``(B, N_keep)`` indices of the patches each sample keeps (MAE): every kept patch keeps
                the position of its original grid cell.

        Returns:
            ``(N(+1), hd/2)``, or ``(B, N_keep(+1), hd/2)`` with ``keep``.
        """
        positions = self.patch_positions(grid, cls_position, device)
        if keep is not None:
            positions = positions[keep]
        if cls_position is not None:
            cls = self.cls_token_position(grid, cls_position, device)
            if keep is not None:
                cls = cls.unsqueeze(0).expand(keep.shape[0], *cls.shape)
            pieces = (cls, positions) if cls_position == 'first' else (positions, cls)
            positions = torch.cat(pieces, dim=-2 if self.mode != '1d' else -1)
        return self.angles(positions)

    def window_angles(self, window_size: Union[int, Tuple[int, int]], device: Optional[torch.device] = None) -> Tensor:
        """Window-local angles ``(h*w, hd/2)`` of an ``h x w`` window (``ws``: ``ws x ws``): integer positions
        ``0..h-1`` / ``0..w-1`` inside the window in raster order, never auto-scaled (ViTDet and the pyramid LSA)."""
        if self.mode == '1d':
            raise RopeConfigError('Windowed attention needs 2D positions; use rope_mode="2d" or "as2d".')
        window = (window_size, window_size) if isinstance(window_size, int) else tuple(window_size)
        return self.angles(grid_positions(window, device=device))

    def subsampled_key_angles(self, grid: Tuple[int, int], sr_ratio: int, key_grid: Tuple[int, int],
                              key_pos: str = 'fixed', device: Optional[torch.device] = None) -> Tensor:
        """Key angles of sub-sampled attention (pyramid GSA): keys are the ``sr x sr`` cells of the query grid.

        ``'fixed'``: key ``(i, j)`` of the ``key_grid`` sits at the centre of its cell, ``(sr i + (sr-1)/2,
        sr j + (sr-1)/2)``. ``'official'`` reproduces the released code: the flat key index ``m`` is unflattened
        with the *query* width ``W`` and offset ``1 - 1/sr``, ``(1 - 1/sr + sr (m // W), 1 - 1/sr + sr (m % W))``
        (wrong for ``sr > 1``, but what the released weights learnt; the official code sizes the table
        ``H W // sr^2``, which is the key count whenever ``sr`` divides the grid, and fails otherwise, so here
        it has one row per key). Both are then scaled like the queries (:meth:`scale` of ``grid``).

        Returns:
            ``(M, hd/2)`` with ``M`` the number of keys.
        """
        check_choice('gsa_key_pos', key_pos, GSA_KEY_POSITIONS, RopeConfigError)
        if self.mode == '1d':
            raise RopeConfigError('Sub-sampled attention needs 2D positions; use rope_mode="2d" or "as2d".')
        offset, width = ((sr_ratio - 1) / 2, key_grid[1]) if key_pos == 'fixed' else (1 - 1 / sr_ratio, grid[1])
        index = torch.arange(key_grid[0] * key_grid[1], device=device)
        if torch.compiler.is_exporting():  # a symbolic width as a tensor: ONNX has no remainder by a symbolic scalar
            width = torch.scalar_tensor(width, dtype=index.dtype, device=device)
        scale_y, scale_x = self.scale(grid)
        positions = torch.stack(((offset + sr_ratio * (index // width)) * scale_y,
                                 (offset + sr_ratio * (index % width)) * scale_x), dim=-1)
        return self.angles(positions)

    def extra_repr(self) -> str:
        return (f'mode={self.mode!r}, anchor={self.anchor}, as2d_scaling={self.as2d_scaling!r}, '
                f'cls_rope={self.cls_rope!r}')
