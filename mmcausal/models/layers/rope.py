"""Rotary position embedding (RoPE, Su et al. 2021), the position family shared by all backbones.

A rotary embedding is split in two steps so every variant shares the rotation:

1. an *angle table* ``(..., N, head_dim // 2)`` in fp32, one angle per token and channel pair,
   computed from the actual token positions at forward time (never from a constructor-time length);
2. :func:`apply_rotary`, which rotates each adjacent channel pair ``(x[2i], x[2i+1])`` of q and k by its
   angle (the "interleaved" layout of Meta's LLaMA and of iLLaMA's released weights).

With angles ``t * w_i`` the score ``<R(t) q, R(s) k>`` depends on ``t - s`` only.
"""
from typing import Optional, Sequence, Tuple, Union

import torch
from mmengine.utils import to_2tuple
from torch import Tensor, nn

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice


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


def rotate_pairs_real(x: Tensor, angles: Tensor, second_angles: Optional[Tensor] = None) -> Tensor:
    """:func:`rotate_pairs` in real arithmetic: ``(x0 cos a - x1 sin a, x1 cos b + x0 sin b)`` per channel pair,
    computed in (at least) fp32 and cast back to ``x.dtype``, with ``b = a`` (a rotation) unless ``second_angles``
    gives the second member of each pair its own angle (:func:`apply_unpaired_rotary`)."""
    x0, x1 = x.to(torch.promote_types(x.dtype, torch.float32)).unflatten(-1, (-1, 2)).unbind(-1)
    cos, sin = angles.cos(), angles.sin()
    cos1, sin1 = (cos, sin) if second_angles is None else (second_angles.cos(), second_angles.sin())
    return torch.stack((x0 * cos - x1 * sin, x1 * cos1 + x0 * sin1), dim=-1).flatten(-2).type_as(x)


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


def rotate_pairs_into(out: Tensor, x: Tensor, rotation: Tensor) -> None:
    """Write ``x`` ``(..., d)`` with its channel pairs multiplied by ``rotation`` (complex, broadcastable to
    ``(..., d // 2)``) into ``out`` (same shape, whole pairs in memory), without autograd. fp32/fp64 ``x`` is
    rotated straight into ``out``; lower precision goes through fp32 and is cast back."""
    if x.dtype == out.dtype and x.dtype in (torch.float32, torch.float64):
        torch.mul(complex_pairs(x), rotation, out=torch.view_as_complex(out.unflatten(-1, (-1, 2))))
    else:
        out.copy_(torch.view_as_real(complex_pairs(x.float()) * rotation).flatten(-2))


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


class RopeConfigError(UserInputError, ValueError):
    """An unknown or invalid RoPE setting in a config (the message lists the valid values)."""


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


def defocus_frequencies(count: int) -> Tensor:
    """De-focus's initial learnable-RoPE frequencies ``f_n = (100^(-n/K) - 100^-1) / (1 - 100^-1)``, ``n = 1..K``
    (notes B1): from ~0.747 down to exactly 0 (the last dim is a pure low-pass channel)."""
    steps = torch.arange(1, count + 1, dtype=torch.float64) / count
    return ((100. ** -steps - 0.01) / 0.99).float()


def apply_unpaired_rotary(x: Tensor, angles: Tensor) -> Tensor:
    """The released De-focus Mamba's "rotate every two" with one angle per *channel*, not per pair.

    ``out[2j] = x[2j] cos a_2j - x[2j+1] sin a_2j`` and ``out[2j+1] = x[2j+1] cos a_2j+1 + x[2j] sin a_2j+1``:
    the two members of a pair turn by different angles, so it is not a rotation and ``<R_t c, R_s b>`` is not a
    function of ``t - s`` (a quirk the released weights learnt). With ``a_2j = a_2j+1`` it is
    :func:`apply_rotary`.

    Args:
        x: ``(..., L, K)``.
        angles: ``(L, K)`` fp32.

    Returns:
        Tensor like ``x`` (computed in at least fp32).
    """
    first, second = angles.unflatten(-1, (-1, 2)).unbind(-1)
    return rotate_pairs_real(x, first, second)


ROPE_PAIRINGS = ('unpaired', 'paired')


class LearnableRoPE(nn.Module):
    """RoPE with learnable frequencies over a 1-D token sequence (De-focus, paper Sec. 3.2: with the learnable
    decay it makes a learnable band-pass filter). Positions are the sequence indices ``t / position_scale``.

    Args:
        num_dims: channels rotated (``K``, even).
        pairing: ``'unpaired'`` (the released De-focus Mamba: ``K`` frequencies, one per channel,
            :func:`apply_unpaired_rotary`; needed for its weights) or ``'paired'`` (a true rotation, ``K / 2``
            frequencies, :func:`apply_rotary`). Initial frequencies: :func:`defocus_frequencies` of their count.
        legacy_bf16: in training, round positions and angles to bfloat16 as the official bf16-autocast training
            did (angles >= 128 rad become whole radians); its evaluation, and ours otherwise, is fp32.

    Attributes:
        freq: the learnable frequencies (the official key ``mixer.freq`` in ``'unpaired'``).
    """

    def __init__(self, num_dims: int, pairing: str = 'unpaired', legacy_bf16: bool = False) -> None:
        super().__init__()
        if num_dims % 2:
            raise RopeConfigError(f'RoPE needs an even number of channels, got {num_dims}.')
        self.pairing = check_choice('rope pairing', pairing, ROPE_PAIRINGS, RopeConfigError)
        self.legacy_bf16 = legacy_bf16
        self.freq = nn.Parameter(defocus_frequencies(num_dims if pairing == 'unpaired' else num_dims // 2))

    def angles(self, length: int, position_scale: float = 1.) -> Tensor:
        """``(length, len(freq))`` angles ``(t / position_scale) * f``."""
        if self.legacy_bf16 and self.training:
            positions = torch.arange(length, device=self.freq.device, dtype=torch.bfloat16) / position_scale
            return (positions[:, None] * self.freq.bfloat16()).float()
        positions = torch.arange(length, device=self.freq.device, dtype=torch.float32) / position_scale
        return positions[:, None] * self.freq.float()

    def forward(self, *xs: Tensor, position_scale: float = 1.) -> Union[Tensor, Tuple[Tensor, ...]]:
        """Rotate each ``x`` ``(..., L, K)`` (same ``L``) by the angles of positions ``0..L-1``, computed once."""
        angles = self.angles(xs[0].shape[-2], position_scale)
        rotate = apply_unpaired_rotary if self.pairing == 'unpaired' else apply_rotary
        rotated = tuple(rotate(x, angles) for x in xs)
        return rotated[0] if len(rotated) == 1 else rotated

    def extra_repr(self) -> str:
        return f'pairing={self.pairing!r}, legacy_bf16={self.legacy_bf16}'


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
      (:meth:`subsampled_key_angles`, pyramid GSA);
    * De-focus's resolution knobs: learnable frequencies and ``rope_scale_factor`` (positions are divided by it).

    Tables are computed from the actual grid at every call (fp32, never cached across forwards); a
    :class:`~mmcausal.models.layers.TokenLayout` memoises them within one forward. The frequency ladders are
    non-persistent buffers (no state-dict keys) unless ``learnable_freqs``, where the ladder of ``mode`` is the
    parameter ``freqs`` and the mode can no longer switch between 1D and 2D.

    Args:
        head_dim: channels per head (even; a multiple of 4 for the 2D modes).
        mode: ``'1d' | '2d' | 'as2d'``; settable at run time (the resolution tool switches it).
        anchor: AS2DRoPE anchor grid ``(B_h, B_w)`` in tokens (int or pair).
        as2d_scaling: ``'per_axis' | 'isotropic'``.
        cls_rope: class-token rotation in 2D: ``'identity'`` (angle 0) or the official deit quirk of rotating it
            like flat index -1, i.e. column ``W - 1`` and row ``0`` (``'legacy_trunc'``) or ``-1`` (``'legacy_floor'``).
        theta: frequency base.
        requires_2d: the backbone's mixers need 2D positions (windows, GSA): refuse ``mode='1d'``.
        learnable_freqs: make the frequency ladder of ``mode`` a trainable parameter.
        rope_scale_factor: divide every position by this factor (1 = none; De-focus's resolution transfer).
    """

    def __init__(self, head_dim: int, mode: str = 'as2d', anchor: Union[int, Sequence[int]] = 14,
                 as2d_scaling: str = 'per_axis', cls_rope: str = 'identity', theta: float = 10000.,
                 requires_2d: bool = False, learnable_freqs: bool = False, rope_scale_factor: float = 1.) -> None:
        super().__init__()
        if head_dim % 2:
            raise RopeConfigError(f'RoPE needs an even head_dim, got {head_dim}.')
        if rope_scale_factor <= 0:
            raise RopeConfigError(f'rope_scale_factor must be > 0, got {rope_scale_factor}.')
        self.head_dim = head_dim
        self.requires_2d = requires_2d
        self.learnable_freqs = learnable_freqs
        self.rope_scale_factor = float(rope_scale_factor)
        self.register_buffer('freqs_1d', rope_frequencies(head_dim // 2, theta), persistent=False)
        self.register_buffer('freqs_2d', rope_frequencies(head_dim // 4, theta), persistent=False)
        self.mode = mode
        self.anchor = anchor
        self.as2d_scaling = as2d_scaling
        self.cls_rope = check_choice('cls_rope', cls_rope, CLS_ROPE_MODES, RopeConfigError)
        if learnable_freqs:
            self.freqs = nn.Parameter(self._ladder().clone())

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
        if self.learnable_freqs and (mode == '1d') != (getattr(self, '_mode', mode) == '1d'):
            raise RopeConfigError('Learnable RoPE frequencies belong to their mode; cannot switch between 1D and 2D.')
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

    def _ladder(self) -> Tensor:
        if self.learnable_freqs and hasattr(self, 'freqs'):
            return self.freqs
        return self.freqs_1d if self.mode == '1d' else self.freqs_2d

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
        if self.mode == '1d':
            index = 0. if cls_position == 'first' else float(grid[0] * grid[1])
            return torch.full((1, ), index, device=device)
        if self.cls_rope == 'identity':
            return torch.zeros(1, 2, device=device)
        row = 0. if self.cls_rope == 'legacy_trunc' else -1.
        scale_y, scale_x = self.scale(grid)
        return torch.tensor([[row * scale_y, (grid[1] - 1) * scale_x]], device=device)

    def angles(self, positions: Tensor) -> Tensor:
        """Positions ``(..., N)`` (1D) or ``(..., N, 2)`` (2D), divided by ``rope_scale_factor``, -> angles
        ``(..., N, head_dim/2)`` fp32."""
        positions = positions / self.rope_scale_factor if self.rope_scale_factor != 1. else positions
        if self.mode == '1d':
            return rope_angles_1d(positions, self._ladder())
        return rope_angles_2d(positions, self._ladder())

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

    def window_angles(self, window_size: int, device: Optional[torch.device] = None) -> Tensor:
        """Window-local angles ``(ws*ws, hd/2)``: integer positions ``0..ws-1`` inside the window, never
        auto-scaled (ViTDet and the pyramid LSA)."""
        if self.mode == '1d':
            raise RopeConfigError('Windowed attention needs 2D positions; use rope_mode="2d" or "as2d".')
        return self.angles(grid_positions((window_size, window_size), device=device))

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
        scale_y, scale_x = self.scale(grid)
        positions = torch.stack(((offset + sr_ratio * (index // width)) * scale_y,
                                 (offset + sr_ratio * (index % width)) * scale_x), dim=-1)
        return self.angles(positions)

    def extra_repr(self) -> str:
        return (f'mode={self.mode!r}, anchor={self.anchor}, as2d_scaling={self.as2d_scaling!r}, '
                f'cls_rope={self.cls_rope!r}')
