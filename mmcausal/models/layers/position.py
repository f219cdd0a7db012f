"""Where tokens sit and how RoPE turns positions into rotations, shared by every family.

* :class:`TokenLayout`: the position context a backbone builds once per forward and hands to every block (patch
  grid, class-token slot, token order, the RoPE policy and its angle table; it memoises the tables that only some
  mixers derive, so each is built once per forward however many blocks use it);
* the token -> feature-map conversion;
* rotary position embedding (RoPE, Su et al. 2021) in two steps: an angle table ``(..., N, head_dim // 2)`` in fp32
  from the actual token positions, then :func:`apply_rotary`, which rotates each adjacent channel pair
  ``(x[2i], x[2i+1])`` by its angle (the interleaved layout of LLaMA and of iLLaMA's released weights); with angles
  ``t * w_i`` the score ``<R(t) q, R(s) k>`` depends on ``t - s`` only;
* :class:`GridRoPE`, the position policy of a backbone: token grid -> positions -> angle tables, in 1D (sequence
  index), 2D (VisionLLaMA Eq. 1) or AS2D (auto-scaled onto an anchor grid, Eq. 4).
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Hashable, Optional, Sequence, Tuple, Union

import torch
from mmengine.utils import to_2tuple
from torch import Tensor, nn

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice


def tokens_to_featmap(tokens: Tensor, grid: Tuple[int, int]) -> Tensor:
    """``(B, H*W, D)`` patch tokens in raster order -> a contiguous ``(B, D, H, W)`` feature map.

    Contiguous on purpose: ``tokens.transpose(1, 2).reshape(...)`` is a view with channels-last strides, convolutions
    propagate that layout to the neck's outputs, and mmcv's compiled ops (``RoIAlign`` in every two-stage detector,
    CPU and CUDA) read the raw memory as NCHW without checking strides, so RoI features would be silently scrambled.
    """
    return tokens.transpose(1, 2).reshape(tokens.shape[0], tokens.shape[2], *grid).contiguous()


class RopeConfigError(UserInputError, ValueError):
    """An unknown or invalid RoPE setting in a config (the message lists the valid values)."""


def rope_frequencies(num_pairs: int, theta: float = 10000.) -> Tensor:
    """Frequencies ``w_i = theta^(-i / num_pairs)`` for ``i = 0..num_pairs-1`` (RoFormer Eq. 15).

    For a 1D RoPE over ``head_dim`` channels ``num_pairs = head_dim // 2``, i.e. ``w_i = theta^(-2i/head_dim)``.
    """
    exponents = torch.arange(num_pairs, dtype=torch.float64) / num_pairs
    return (theta ** -exponents).float()


def apply_rotary(x: Tensor, angles: Tensor) -> Tensor:
    """Rotate adjacent channel pairs of ``x`` by ``angles``.

    Args:
        x: ``(B, heads, N, head_dim)`` queries or keys.
        angles: ``(N, head_dim // 2)`` shared by the batch, or ``(B, N, head_dim // 2)`` per sample.

    Returns:
        Tensor like ``x``, see :func:`rotate_pairs`.
    """
    return rotate_pairs(x, angles.unsqueeze(1) if angles.dim() == 3 else angles)  # broadcast over heads


def rotate_pairs(x: Tensor, angles: Tensor) -> Tensor:
    """``(x0, x1) -> (x0 cos a - x1 sin a, x0 sin a + x1 cos a)`` for every channel pair of ``x`` ``(..., d)``,
    with ``angles`` broadcastable to ``(..., d // 2)`` (any token layout).

    Eager: one complex product ``(x0 + i x1) * exp(i a)`` in (at least) fp32, cast back to ``x.dtype``; with fixed
    angles backward keeps only the ``exp(i a)`` table, never a copy of ``x``. Under ``torch.compile`` the same
    rotation in real arithmetic (:func:`rotate_pairs_real`: complex views of real tensors do not trace, and the
    compiler fuses the real form into one kernel). Differentiable in ``x`` and ``angles``.
    """
    if torch.compiler.is_compiling():
        return rotate_pairs_real(x, angles)
    pairs = complex_pairs(x.to(torch.promote_types(x.dtype, torch.float32)))
    return torch.view_as_real(pairs * rotation_table(angles)).flatten(-2).type_as(x)


def rotate_pairs_real(x: Tensor, angles: Tensor) -> Tensor:
    """:func:`rotate_pairs` in real arithmetic: ``(x0 cos a - x1 sin a, x1 cos a + x0 sin a)`` per channel pair,
    computed in (at least) fp32 and cast back to ``x.dtype``."""
    x0, x1 = x.to(torch.promote_types(x.dtype, torch.float32)).unflatten(-1, (-1, 2)).unbind(-1)
    cos, sin = angles.cos(), angles.sin()
    return torch.stack((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1).flatten(-2).type_as(x)


def rotation_table(angles: Tensor) -> Tensor:
    """``exp(i a)`` (complex) for an angle table ``a``, the factor :func:`rotate_pairs` multiplies pairs by."""
    return torch.polar(torch.ones_like(angles), angles)


def complex_pairs(x: Tensor) -> Tensor:
    """Adjacent channel pairs of ``x`` ``(..., d)`` as complex numbers ``(..., d // 2)``: a view where the strides
    allow it (whole ``(re, im)`` pairs), else a view of a fresh contiguous copy."""
    pairs = x.unflatten(-1, (-1, 2))
    if pairs.storage_offset() % 2 or any(stride % 2 for stride in pairs.stride()[:-1]) or pairs.stride(-1) != 1:
        pairs = pairs.clone(memory_format=torch.contiguous_format)
    return torch.view_as_complex(pairs)


def rope_angles_1d(positions: Tensor, freqs: Tensor) -> Tensor:
    """1D RoPE angle table ``angles[..., t, i] = p_t * w_i``: positions ``(..., N)`` -> ``(..., N, len(freqs))``."""
    return positions.float().unsqueeze(-1) * freqs


def rope_angles_2d(positions: Tensor, freqs: Tensor) -> Tensor:
    """2D RoPE angle table (VisionLLaMA Sec. 3.1, channel layout of the official code).

    With ``d = head_dim`` and ``w_k = theta^(-4k/d)`` for ``k < d/4`` (``freqs``), channel pair ``2k`` (channels
    ``4k, 4k+1``) turns by ``x * w_k`` and pair ``2k+1`` (channels ``4k+2, 4k+3``) by ``y * w_k``:
    ``angles[n] = [x w_0, y w_0, x w_1, y w_1, ...]``. The score ``<R(y,x) q, R(y',x') k>`` then depends on
    ``(y - y', x - x')`` only, and one table serves every head.

    Args:
        positions: ``(..., N, 2)`` as ``(y, x)``.
        freqs: ``(d/4,)`` per-axis frequencies.

    Returns:
        ``(..., N, d/2)`` fp32 angles.
    """
    positions = positions.float()
    along_x = positions[..., 1:2] * freqs
    along_y = positions[..., 0:1] * freqs
    return torch.stack((along_x, along_y), dim=-1).flatten(-2)


ROPE_MODES = ('1d', '2d', 'as2d')

AS2D_SCALINGS = ('isotropic', 'per_axis')

CLS_ROPE_MODES = ('identity', 'legacy_trunc', 'legacy_floor')


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
    if scaling not in AS2D_SCALINGS:
        check_as2d_scaling(scaling)  # raises, naming the choices
    if scaling == 'isotropic':
        return anchor[0] / grid_size[0], anchor[0] / grid_size[0]
    return anchor[0] / grid_size[0], anchor[1] / grid_size[1]


class GridRoPE(nn.Module):
    """The RoPE position policy of a backbone: token grid -> angle tables for every kind of mixer.

    One module per backbone (or per pyramid stage) owns the choices that turn a patch grid into positions:

    * ``mode``: ``'1d'`` (flat sequence index ``t``, LLaMA/iLLaMA/De-focus), ``'2d'`` (integer ``(row, col)``,
      VisionLLaMA Eq. 1) or ``'as2d'`` (``(row, col)`` auto-scaled onto the ``anchor`` grid, VisionLLaMA Eq. 4);
    * ``as2d_scaling``: ``'isotropic'`` (Eq. 4 and the official code) or ``'per_axis'``, see :func:`auto_scale`;
    * the class-token rotation (``cls_rope``) in the 2D modes; in ``'1d'`` the class token is the sequence index
      it sits at (``0`` first, ``N`` last);

    VisionLLaMA's windowed and sub-sampled attention derive their own tables from it
    (:mod:`mmcausal.models.vision_llama.twins_attention`).

    Tables are computed from the actual grid at every call (fp32, never cached across forwards); a
    :class:`~mmcausal.models.layers.TokenLayout` memoises them within one forward. The frequency ladders are
    non-persistent buffers (no state-dict keys). Learnable frequencies (De-focus) are
    :class:`~mmcausal.models.defocus.LearnableRoPE`, inside the mixers.

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

    def extra_repr(self) -> str:
        return (f'mode={self.mode!r}, anchor={self.anchor}, as2d_scaling={self.as2d_scaling!r}, '
                f'cls_rope={self.cls_rope!r}')


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
