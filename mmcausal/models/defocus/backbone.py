"""De-focus Attention Networks (Tao et al. 2024, "Learning 1D Causal Visual Representation with De-focus Attention
Networks"): De-focus Mamba (the released model) and the paper-derived De-focus ViT and RetNet.

All three read ``[patch_1 .. patch_N, cls]`` (class token last) through strictly causal mixers with a learnable
band-pass filter (decay + learnable-frequency RoPE), so token ``t`` only sees tokens ``s <= t``:

* :class:`DefocusMamba`: blocks ``x + DropPath(Mixer(RMSNorm(x)))`` (no FFN;
  :class:`~.mamba.DefocusMambaMixer`), no position embedding, final LayerNorm.
* :class:`DefocusViT` / :class:`DefocusRetNet`: ViT-B-sized pre-norm blocks (LayerNorm, GELU MLP) around
  :class:`~.transformer.DecayAttention` (Eq. 8) or :class:`~.retention.MultiScaleRetention`
  (Eq. 4). No official code exists for them: they are reconstructions from the paper (Sec. 4.1, Fig. 2, Sec. 5.1).


Causal by design: ``mask_mode='causal'`` is their only mode (and the default). ``'bidirectional'`` and ``'official'``
are refused, each class saying why (its ``refused_mask_modes``): the decay, the retention and the scan are defined
over ``s <= t`` only, and retention and the scan have no softmax for iLLaMA's post-softmax mask.

This module holds what the three share: the base backbone (:class:`DefocusBackbone`: stem, sectioned token order,
the band-pass scale factors), the learnable band-pass filter of every mixer (:class:`LearnableRoPE`, the high-pass
half with learnable frequencies, and :class:`LearnableDecay`, the low-pass half) and the patch rearrangement
(:func:`sectioned_order`). Each backbone and its mixer are in :mod:`.mamba` and :mod:`.transformer`.
"""
from typing import Callable, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.model import ModuleList
from torch import Tensor, nn

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice
from ..layers import (
    BackboneConfigError,
    MaskModeMixin,
    PlainBackbone,
    RopeConfigError,
    TokenLayout,
    apply_rotary,
    build_norm_layer,
    check_image_batch,
    insert_cls_token,
    resize_pos_embed,
    resolve_arch,
)

ScaleFactor = Union[float, str]


def check_scale_factor(name: str, value: ScaleFactor) -> ScaleFactor:
    """A positive number or ``'auto'``; a clear error otherwise."""
    if value == 'auto' or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
        return value
    raise BackboneConfigError(f'{name} must be a positive number or "auto", got {value!r}.')


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


def defocus_frequencies(count: int) -> Tensor:
    """De-focus's initial learnable-RoPE frequencies ``f_n = (100^(-n/K) - 100^-1) / (1 - 100^-1)``, ``n = 1..K``
    (the released ``MambaMixer``'s ``freq``): from ~0.747 down to exactly 0 (the last dim is a pure low-pass
    channel)."""
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
    x0, x1 = x.to(torch.promote_types(x.dtype, torch.float32)).unflatten(-1, (-1, 2)).unbind(-1)
    return torch.stack((x0 * first.cos() - x1 * first.sin(), x1 * second.cos() + x0 * second.sin()),
                       dim=-1).flatten(-2).type_as(x)


ROPE_PAIRINGS = ('unpaired', 'paired')


class LearnableRoPE(nn.Module):
    """RoPE with learnable frequencies over a 1-D token sequence (De-focus, paper Sec. 4.1: with the learnable
    decay it makes a learnable band-pass filter). Positions are the sequence indices ``t / position_scale``.

    Args:
        num_dims: channels rotated (``K``, even).
        pairing: ``'unpaired'`` (the released De-focus Mamba: ``K`` frequencies, one per channel,
            :func:`apply_unpaired_rotary`; needed for its weights) or ``'paired'`` (a true rotation, ``K / 2``
            frequencies, :func:`apply_rotary`). Initial frequencies: :func:`defocus_frequencies` of their count.
        legacy_bf16: in training, round positions and angles to bfloat16 as the official bf16-autocast training
            did (angles >= 128 rad become whole radians); its evaluation, and ours otherwise, is fp32.
        learnable: whether the frequencies are trained (paper Table 4(a): "learnable" RoPE); False keeps them at
            their initial values as a buffer of the same name ("fixed" RoPE).

    Attributes:
        freq: the frequencies (the official key ``mixer.freq`` in ``'unpaired'``); a parameter, or a buffer when
            not ``learnable``.
    """

    def __init__(self, num_dims: int, pairing: str = 'unpaired', legacy_bf16: bool = False,
                 learnable: bool = True) -> None:
        super().__init__()
        if num_dims % 2:
            raise RopeConfigError(f'RoPE needs an even number of channels, got {num_dims}.')
        self.pairing = check_choice('rope pairing', pairing, ROPE_PAIRINGS, RopeConfigError)
        self.legacy_bf16 = legacy_bf16
        self.learnable = learnable
        freq = defocus_frequencies(num_dims if pairing == 'unpaired' else num_dims // 2)
        if learnable:
            self.freq = nn.Parameter(freq)
        else:
            self.register_buffer('freq', freq)

    def angles(self, length: int, position_scale: float = 1.) -> Tensor:
        """``(length, len(freq))`` angles ``(t / position_scale) * f``, in fp32 (fp64 for an fp64 module)."""
        if self.legacy_bf16 and self.training:
            positions = torch.arange(length, device=self.freq.device, dtype=torch.bfloat16) / position_scale
            return (positions[:, None] * self.freq.bfloat16()).float()
        dtype = torch.promote_types(self.freq.dtype, torch.float32)
        positions = torch.arange(length, device=self.freq.device, dtype=dtype) / position_scale
        return positions[:, None] * self.freq.to(dtype)

    def forward(self, *xs: Tensor, position_scale: float = 1.) -> Union[Tensor, Tuple[Tensor, ...]]:
        """Rotate each ``x`` ``(..., L, K)`` (same ``L``) by the angles of positions ``0..L-1``, computed once."""
        angles = self.angles(xs[0].shape[-2], position_scale)
        rotate = apply_unpaired_rotary if self.pairing == 'unpaired' else apply_rotary
        rotated = tuple(rotate(x, angles) for x in xs)
        return rotated[0] if len(rotated) == 1 else rotated

    def extra_repr(self) -> str:
        return f'pairing={self.pairing!r}, legacy_bf16={self.legacy_bf16}, learnable={self.learnable}'


def retnet_decay_exponents(num_heads: int, low: float = 5., high: float = 12.) -> Tensor:
    """``lambda_hat`` so that ``gamma_h = exp(lambda_h) = 1 - 2^-e_h`` with ``e_h`` evenly spaced over
    ``[low, high]`` (RetNet-like decays, Sun et al. 2023): ``lambda_hat = log(-log(1 - 2^-e))``, shape
    ``(num_heads,)``."""
    exponents = torch.linspace(low, high, num_heads, dtype=torch.float64) if num_heads > 1 else \
        torch.tensor([low], dtype=torch.float64)
    return torch.log(-torch.log1p(-2. ** -exponents)).float()


class LearnableDecay(nn.Module):
    """Per-head exponential decay rates ``lambda_h = -exp(lambda_hat_h) / decay_scale`` (always negative).

    Attributes:
        log_rate: ``lambda_hat`` ``(num_heads,)``, initialised by :func:`retnet_decay_exponents`.
    """

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.log_rate = nn.Parameter(retnet_decay_exponents(num_heads))

    def rates(self, decay_scale: float = 1.) -> Tensor:
        """``(heads,)`` fp32 rates ``lambda_h``; ``decay_scale`` is De-focus's ``delta_scale_factor``."""
        return -torch.exp(self.log_rate.float()) / decay_scale

    def bias(self, length: int, decay_scale: float = 1.) -> Tensor:
        """``(heads, L, L)`` fp32 logit bias ``lambda_h (t - s)``, ``-inf`` above the diagonal (causal)."""
        return decay_bias(self.rates(decay_scale), length)


def decay_bias(rates: Tensor, length: int) -> Tensor:
    """``(heads, L, L)`` logit bias ``lambda_h (t - s)`` of ``rates`` ``(heads,)``, ``-inf`` above the diagonal."""
    steps = torch.arange(length, device=rates.device, dtype=torch.float32)
    distance = steps[:, None] - steps[None, :]
    return (rates[:, None, None] * distance).masked_fill(distance < 0, float('-inf'))


class DefocusBackbone(MaskModeMixin, PlainBackbone):
    """What the De-focus backbones share: the class token at the end of the sequence, the resolution-transfer knobs
    and the patch rearrangement (paper App. B.3, Fig. 7; ``PatchEmbedChangeRes`` in the released
    ``detection/mmdet_custom/models/mamba/defocus_mamba_backbone.py``). Subclasses call :meth:`_build_stem` and
    build ``layers`` / ``norm``.

    Resolution transfer: ``delta_scale_factor`` divides the decay rates (Mamba's step sizes Delta) and
    ``rope_scale_factor`` the RoPE positions; the released detector uses ``4.57 ~ r`` and ``20.0 ~ r^2`` for 1024 px
    inputs to a 224 px model (``r = 1024 / 224``). ``'auto'`` derives them from every input instead: ``r^2`` is its
    patch count over the ``img_size`` grid's. ``patch_rearrange`` visits the image section by section (sections of
    the ``img_size`` grid, :func:`sectioned_order`), padding it to whole sections.
    """
    cls_position = 'last'
    stem_parameters = ('cls_token', 'pos_embed')  # pos_embed only where with_pos_embed

    def _build_stem(self, arch: Union[str, dict], required: Tuple[str, ...], in_channels: int, patch_size: int,
                    img_size: Union[int, Tuple[int, int]], delta_scale_factor: ScaleFactor,
                    rope_scale_factor: ScaleFactor, patch_rearrange: bool, out_indices: Union[int, Sequence[int]],
                    out_type: str, final_norm: bool, frozen_stages: int, mask_mode: str,
                    with_pos_embed: bool = False) -> dict:
        """Check ``mask_mode``; resolve ``arch`` (returned), outputs, scale factors, patch embedding, class token (and
        a learnable position table, cls row last)."""
        self._set_mask_mode(mask_mode)
        setting = resolve_arch(arch, self.arch_zoo, required)
        self.embed_dims = setting['embed_dims']
        self.num_layers = setting['num_layers']
        self._set_outputs(out_indices, out_type, final_norm, frozen_stages)
        if patch_rearrange and self.out_type == 'raw':
            raise BackboneConfigError('out_type="raw" returns the token sequence, which with patch_rearrange=True is '
                                      'in section order and holds the padding to whole sections; use "featmap", '
                                      '"avg_featmap" or "cls_token".')
        self.delta_scale_factor = check_scale_factor('delta_scale_factor', delta_scale_factor)
        self.rope_scale_factor = check_scale_factor('rope_scale_factor', rope_scale_factor)
        self.patch_rearrange = patch_rearrange
        self.patch_size = patch_size
        self._build_patch_embed(in_channels, patch_size, img_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        if with_pos_embed:
            num_patches = self.patch_resolution[0] * self.patch_resolution[1]
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, self.embed_dims))
            self._register_load_state_dict_pre_hook(self._resize_loaded_pos_embed)
        return setting

    def _build_blocks(self, block: Callable[[int], nn.Module], final_norm_cfg: dict, drop_path_rate: float,
                      with_cp: bool) -> None:
        """``num_layers`` blocks (``block(embed_dims)``), the final norm, drop path, ``with_cp``, frozen stages."""
        # mmengine's ModuleList passes init_weights on (the Mamba mixer restores its dt_proj init after the Linear init)
        self.layers = ModuleList(block(self.embed_dims) for _ in range(self.num_layers))
        self.drop_path_rate = drop_path_rate
        self.norm = build_norm_layer(final_norm_cfg, self.embed_dims) if self.final_norm else nn.Identity()
        self.pool_norm = nn.Identity()
        self.with_cp = with_cp
        self._freeze_stages()

    @staticmethod
    def _resolve_scale(factor: ScaleFactor, auto_value: float) -> float:
        return auto_value if factor == 'auto' else float(factor)

    def _pad_to_sections(self, x: Tensor) -> Tensor:
        """Zero-pad ``x`` at the bottom/right to whole sections (``img_size`` grids) of patches."""
        rows, cols = (side * self.patch_size for side in self.patch_resolution)
        return F.pad(x, (0, -x.shape[-1] % cols, 0, -x.shape[-2] % rows))

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """``(B, C, H, W)`` images -> one output per ``out_indices`` entry (shapes: see ``out_type``)."""
        check_image_batch(x, self.in_channels)
        # ceil(side / p) in integers: a symbolic size under torch.export stays an integer expression
        image_grid = (-(-x.shape[-2] // self.patch_size), -(-x.shape[-1] // self.patch_size))
        if self.patch_rearrange:
            x = self._pad_to_sections(x)
        patches, grid = self.patch_embed(x)
        cls_token = self.cls_token
        if hasattr(self, 'pos_embed'):
            pos_embed = resize_pos_embed(self.pos_embed, self.patch_resolution, grid, cls_position=self.cls_position)
            patches, cls_token = patches + pos_embed[:, :-1], cls_token + pos_embed[:, -1:]
        order = sectioned_order(grid, self.patch_resolution, patches.device) if self.patch_rearrange else None
        if order is not None:
            patches = patches[:, order]
        tokens = insert_cls_token(patches, cls_token, self.cls_position)
        area_ratio = image_grid[0] * image_grid[1] / (self.patch_resolution[0] * self.patch_resolution[1])
        layout = TokenLayout(grid, self.cls_position, order=order, image_grid=image_grid,
                             position_scale=self._resolve_scale(self.rope_scale_factor, area_ratio),
                             decay_scale=self._resolve_scale(self.delta_scale_factor, area_ratio ** 0.5))
        return self.run_layers(tokens, layout)
