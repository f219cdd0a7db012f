"""De-focus Attention Networks (Tao et al. 2024, "Learning 1D Causal Visual Representation with De-focus Attention
Networks"): De-focus Mamba (the released model) and the paper-derived De-focus ViT and RetNet.

All three read ``[patch_1 .. patch_N, cls]`` (class token last) through strictly causal mixers with a learnable
band-pass filter (decay + learnable-frequency RoPE), so token ``t`` only sees tokens ``s <= t``:

* :class:`DefocusMamba`: blocks ``x + DropPath(Mixer(RMSNorm(x)))`` (no FFN;
  :class:`~.ssm.DefocusMambaMixer`), no position embedding, final LayerNorm.
* :class:`DefocusViT` / :class:`DefocusRetNet`: ViT-B-sized pre-norm blocks (LayerNorm, GELU MLP) around
  :class:`~.decay.DecayAttention` (Eq. 8) or :class:`~.retention.MultiScaleRetention`
  (Eq. 4). No official code exists for them (notes B2): they are reconstructions from the paper.

Causal by design: ``mask_mode='causal'`` is their only mode (and the default). ``'bidirectional'`` and ``'official'``
are refused, each class saying why (its ``refused_mask_modes``): the decay, the retention and the scan are defined
over ``s <= t`` only, and retention and the scan have no softmax for iLLaMA's post-softmax mask.
"""
import inspect
from functools import partial
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.model import ModuleList
from torch import Tensor, nn

from mmcausal.registry import MODELS
from ...layers import TokenLayout, TransformerBlock, build_norm_layer, gelu_mlp, insert_cls_token, resize_pos_embed
from ..base import BackboneConfigError, MaskModeMixin, PlainBackbone, check_image_batch, resolve_arch
from .decay import DecayAttention
from .retention import MultiScaleRetention
from .ssm import DefocusMambaMixer
from .token_order import sectioned_order

ScaleFactor = Union[float, str]


def check_scale_factor(name: str, value: ScaleFactor) -> ScaleFactor:
    """A positive number or ``'auto'``; a clear error otherwise."""
    if value == 'auto' or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
        return value
    raise BackboneConfigError(f'{name} must be a positive number or "auto", got {value!r}.')


class DefocusBackbone(MaskModeMixin, PlainBackbone):
    """What the De-focus backbones share: the class token at the end of the sequence, the resolution-transfer knobs
    and the patch rearrangement (notes B4). Subclasses call :meth:`_build_stem` and build ``layers`` / ``norm``.

    Resolution transfer: ``delta_scale_factor`` divides the decay rates (Mamba's step sizes Delta) and
    ``rope_scale_factor`` the RoPE positions; the released detector uses ``4.57 ~ r`` and ``20.0 ~ r^2`` for 1024 px
    inputs to a 224 px model (``r = 1024 / 224``). ``'auto'`` derives them from every input instead: ``r^2`` is its
    patch count over the ``img_size`` grid's. ``patch_rearrange`` visits the image section by section (sections of
    the ``img_size`` grid, :func:`~.token_order.sectioned_order`), padding it to whole sections.
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


@MODELS.register_module()
class DefocusMamba(DefocusBackbone):
    """De-focus Mamba backbone.

    Args:
        arch: ``'small' | 'base' | 'large'`` (or ``s/b/l``), or a dict with ``embed_dims``, ``num_layers`` (and
            optionally ``expand`` 2, ``state_dims`` 16, ``dt_rank`` 48).
        img_size: the (pre-)training resolution: the reference of ``'auto'`` scaling and the section size of
            ``patch_rearrange``. Any input size runs (zero-padded bottom/right to a multiple of ``patch_size``).
        delta_scale_factor: Delta divisor (the official name); a number or ``'auto'`` (``r``).
        rope_scale_factor: RoPE position divisor; a number or ``'auto'`` (``r^2``).
        patch_rearrange: sectioned token order for inputs larger than ``img_size`` (the released detector); the
            padding to whole sections is dropped from every output, which is why ``out_type='raw'`` is refused.
        rope: RoPE on B/C: ``'unpaired'`` (released weights), ``'paired'`` or None.
        legacy_bf16_rope: round RoPE angles to bf16 in training, as the official training did.
        norm_group_size: channels per GroupRMS group of the mixer output (0 = none).
        out_indices, out_type, frozen_stages, with_cp: as mmpretrain's ViT (``'raw'``: all tokens, cls last,
            in sequence order; ``'featmap'``: patches back in raster order, cropped to the input's grid).
        final_norm_cfg: the final norm (``LN`` eps 1e-6; the official detection backbone uses eps 1e-5).
        norm_cfg: the block norm (RMSNorm eps 1e-5).
        drop_path_rate: stochastic depth of the last block (linear from 0); a hook may schedule it.
        scan_impl, chunk_size: selective scan implementation, see :func:`~.scan.selective_scan`.
        mask_mode: ``'causal'`` only (module docstring).
    """
    refused_mask_modes = {
        'bidirectional': 'its selective scan is a causal recurrence by construction (the state at token t is built '
                         'from tokens s <= t only); seeing later tokens needs a second, backward scan, another model; '
                         'use "causal".',
        'official': "iLLaMA's post-softmax mask applies to softmax attention, and a selective scan has no softmax; "
                    'use "causal".'}
    arch_zoo = {
        ('s', 'small'): dict(embed_dims=384, num_layers=24),
        ('b', 'base'): dict(embed_dims=768, num_layers=24),
        ('l', 'large'): dict(embed_dims=1024, num_layers=48),
    }

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 img_size: Union[int, Tuple[int, int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 delta_scale_factor: ScaleFactor = 1.,
                 rope_scale_factor: ScaleFactor = 1.,
                 patch_rearrange: bool = False,
                 rope: Optional[str] = 'unpaired',
                 legacy_bf16_rope: bool = False,
                 norm_group_size: int = 64,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'cls_token',
                 final_norm: bool = True,
                 final_norm_cfg: Optional[dict] = None,
                 norm_cfg: Optional[dict] = None,
                 drop_path_rate: float = 0.,
                 scan_impl: str = 'auto',
                 chunk_size: Optional[int] = None,
                 mask_mode: str = 'causal',
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        setting = self._build_stem(arch, ('embed_dims', 'num_layers'), in_channels, patch_size, img_size,
                                   delta_scale_factor, rope_scale_factor, patch_rearrange, out_indices, out_type,
                                   final_norm, frozen_stages, mask_mode)
        mixer = partial(DefocusMambaMixer, expand=setting.get('expand', 2), state_dims=setting.get('state_dims', 16),
                        dt_rank=setting.get('dt_rank', 48), norm_group_size=norm_group_size, rope=rope,
                        legacy_bf16_rope=legacy_bf16_rope, scan_impl=scan_impl, chunk_size=chunk_size)
        norm_cfg = norm_cfg or dict(type='RMSNorm', eps=1e-5)
        self._build_blocks(partial(TransformerBlock, mixer=mixer, ffn=None, norm_cfg=norm_cfg),
                           final_norm_cfg or dict(type='LN', eps=1e-6), drop_path_rate, with_cp)


class DefocusTransformer(DefocusBackbone):
    """De-focus ViT / RetNet (paper-derived, notes B2): a ViT-B-style stack of pre-norm blocks
    ``x + DropPath(Mixer(LN(x)))``, ``x + DropPath(MLP(LN(x)))`` with a strictly causal mixer built by
    :meth:`build_mixer`, class token last, optional learnable position table (cls row last), final LayerNorm.

    Args:
        arch: ``'small' | 'base'`` (DeiT-S / ViT-B sizes) or a dict with ``embed_dims``, ``num_layers``, ``num_heads``
            (optionally ``feedforward_channels``, default ``4 * embed_dims``).
        with_pos_embed: a learnable absolute position table (resized to each input's grid) besides the decay and RoPE.
            On by default: for De-focus ViT the paper's parameter count says so (see :class:`DefocusViT`); RetNet
            follows it (in one 150-step run on the shapes data its class token's features collapsed to a constant
            without the table and not with it; the table alone does not prevent that collapse at a high lr, see the
            RetNet twin config).
        norm_cfg: block and final norm (``LN`` eps 1e-6, as ViT).
        img_size, patch_size, in_channels, delta_scale_factor, rope_scale_factor, patch_rearrange, out_indices,
        out_type, final_norm, drop_path_rate, frozen_stages, with_cp, mask_mode: as :class:`DefocusMamba`.
    """
    arch_zoo = {
        ('s', 'small'): dict(embed_dims=384, num_layers=12, num_heads=6),
        ('b', 'base'): dict(embed_dims=768, num_layers=12, num_heads=12),
    }

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 img_size: Union[int, Tuple[int, int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 delta_scale_factor: ScaleFactor = 1.,
                 rope_scale_factor: ScaleFactor = 1.,
                 patch_rearrange: bool = False,
                 with_pos_embed: bool = True,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'cls_token',
                 final_norm: bool = True,
                 norm_cfg: Optional[dict] = None,
                 drop_path_rate: float = 0.,
                 mask_mode: str = 'causal',
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = None,
                 **mixer_options) -> None:
        super().__init__(init_cfg=init_cfg)
        setting = self._build_stem(arch, ('embed_dims', 'num_layers', 'num_heads'), in_channels, patch_size, img_size,
                                   delta_scale_factor, rope_scale_factor, patch_rearrange, out_indices, out_type,
                                   final_norm, frozen_stages, mask_mode, with_pos_embed)
        known = set(inspect.signature(self.build_mixer).parameters) - {'embed_dims', 'num_heads'}
        unknown = sorted(set(mixer_options) - known)
        if unknown:
            raise BackboneConfigError(f'{type(self).__name__} got unknown arguments {unknown}; besides the documented '
                                      f'ones, its mixer takes {sorted(known)}.')
        norm_cfg = norm_cfg or dict(type='LN', eps=1e-6)
        mixer = partial(self.build_mixer, num_heads=setting['num_heads'], **mixer_options)
        ffn = partial(gelu_mlp, feedforward_channels=setting.get('feedforward_channels', 4 * self.embed_dims))
        self._build_blocks(partial(TransformerBlock, mixer=mixer, ffn=ffn, norm_cfg=norm_cfg), norm_cfg,
                           drop_path_rate, with_cp)

    @staticmethod
    def build_mixer(embed_dims: int, num_heads: int, **options) -> nn.Module:
        """The token mixer of one block."""
        raise NotImplementedError


@MODELS.register_module()
class DefocusViT(DefocusTransformer):
    """De-focus ViT (paper Eq. 8, a reconstruction): causal softmax attention with a learnable per-head decay bias
    ``lambda_h (t - s)`` and learnable-frequency RoPE (:class:`~.decay.DecayAttention`).

    The position table is on by default: the paper's 87.4 M parameters (with the auxiliary head) are DeiT-B's
    86.6 M plus that head (87.34 M with the table, 87.19 M without). ``qkv_bias`` as ViT. Other arguments: see
    :class:`DefocusTransformer`.
    """
    refused_mask_modes = {
        'bidirectional': 'its band-pass decay lambda_h (t - s) is defined for keys s <= t only (a causal 1D order); '
                         'a two-sided decay would be another model; use "causal".',
        'official': "iLLaMA's post-softmax mask needs the softmax over every key, and the decay bias is not defined "
                    'for later keys s > t; use "causal".'}

    @staticmethod
    def build_mixer(embed_dims: int, num_heads: int, qkv_bias: bool = True) -> nn.Module:
        return DecayAttention(embed_dims, num_heads, qkv_bias=qkv_bias)


@MODELS.register_module()
class DefocusRetNet(DefocusTransformer):
    """De-focus RetNet (paper Eq. 4 with learnable decay and RoPE, a reconstruction): RetNet's multi-scale retention
    (:class:`~.retention.MultiScaleRetention`: ``W_Q, W_K, W_V, W_G, W_O`` of ``D x D``, per-head decay,
    GroupNorm, SiLU gate) in ViT-B-sized blocks with a position table (see ``with_pos_embed``).

    ``retention_chunk_size`` (default 64) sets the chunk-wise form's memory ``O(N T)``; None runs the parallel form.
    Other arguments: see :class:`DefocusTransformer`.
    """
    refused_mask_modes = {
        'bidirectional': "retention's decay matrix is exp(lambda (t - s)) for s <= t and 0 for later keys (its "
                         'chunk-wise recurrent form rests on it); use "causal".',
        'official': "iLLaMA's post-softmax mask applies to softmax attention, and retention has no softmax; use "
                    '"causal".'}

    @staticmethod
    def build_mixer(embed_dims: int, num_heads: int, retention_chunk_size: Optional[int] = 64) -> nn.Module:
        return MultiScaleRetention(embed_dims, num_heads, chunk_size=retention_chunk_size)
