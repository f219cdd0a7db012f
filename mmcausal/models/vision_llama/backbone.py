"""VisionLLaMA, plain variant (Chu et al. 2024, "VisionLLaMA: A Unified LLaMA Backbone for Vision Tasks").

Sequence: ``[cls?, patch_1 .. patch_N]`` (patches in raster order) with no absolute position embedding;
``depth`` pre-norm blocks of LayerNorm -> attention with 2D RoPE on q/k -> LayerNorm -> SwiGLU (paper Eq. 1).
Positions are the token's (row, column) on the patch grid, optionally auto-scaled onto an anchor grid (AS2DRoPE,
Eq. 4). Optional ViTDet-style windowed attention with a list of global blocks.

Attention is bidirectional, as in the paper and every released weight (``mask_mode='bidirectional'``), or causal
in raster order (``'causal'``; ``'official'`` is iLLaMA's post-softmax soft mask). Under a causal mask the class
token moves to the end of the sequence, ``[patch_1 .. patch_N, cls]``, the only slot that sees every patch (iLLaMA's
post-sequence class token); RoPE rotates a token by its grid position, not by its slot, so moving the class token
changes no angle. Windowed blocks stay causal: a window's own raster order is the image's raster order restricted
to the window, so a token sees the earlier tokens of its window and nothing later (earlier tokens of other windows
reach it through the global blocks).

Weight layouts (``layout``; each field can also be overridden on its own):

================  =========================  ============  ===========  =============  ===============  ==========
layout            SwiGLU width (``ffn_ratio``) SwiGLU bias   LayerScale   FFN drop path  cls rotation     drop path
================  =========================  ============  ===========  =============  ===============  ==========
``clean``         2/3 * 4D (ViT params)      no            off          yes            none             linear
``official_mae``  2/3 * 16D (8192 for B)     yes           off          no             none             linear
``official_deit`` 2/3 * 4D                   no            1e-4         yes            ``legacy_trunc`` uniform
================  =========================  ============  ===========  =============  ===============  ==========

``official_mae`` is the layout of the released MAE weights (the official
``mmpretrain/mmpretrain/models/backbones/vision_llama.py``): its SwiGLU is ``round_up(8/3 * 4D, 256)`` wide with
biases and only the attention branch has drop path. ``official_deit`` is the supervised timm model (``VisionLLaMA``
in the official ``deit/my_models.py``; no weights were released): its drop path has the same rate in every
block. The FFN is always stored fused (``ffn.w12 = [gate; up]``); converters fuse split official layouts.

The ablations of paper Table 7 are plain arguments: ``ffn_type='gelu'`` (a) (ViT's GELU MLP of width
``ffn_ratio * D``), ``norm_cfg=dict(type='RMSNorm')`` (b), ``rope_ratio`` (c) and ``rope_shared`` (e)
(:mod:`.rope_variants`), ``rope_theta`` (d), and ``with_cls_token=False, out_type='avg_featmap'`` (f).
"""
import warnings
from functools import partial
from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.validation import check_choice
from ..layers import (
    BackboneConfigError,
    GridRoPE,
    MaskedAttentionMixin,
    PlainBackbone,
    SelfAttention,
    SwiGLUFFN,
    TokenLayout,
    TransformerBlock,
    build_norm_layer,
    check_head_split,
    check_image_batch,
    gelu_mlp,
    insert_cls_token,
    resolve_arch,
    swiglu_hidden_dims,
)
from ..layers.backbone import cls_position_for
from .rope_variants import HeadwiseRoPEAttention, PartialGridRoPE
from .twins_attention import WindowedAttention

LAYOUTS = {
    'clean': dict(ffn_ratio=4., ffn_bias=False, layer_scale_init_value=0., ffn_drop_path=True, cls_rope='identity',
                  drop_path_schedule='linear'),
    'official_mae': dict(ffn_ratio=16., ffn_bias=True, layer_scale_init_value=0., ffn_drop_path=False,
                         cls_rope='identity', drop_path_schedule='linear'),
    'official_deit': dict(ffn_ratio=4., ffn_bias=False, layer_scale_init_value=1e-4, ffn_drop_path=True,
                          cls_rope='legacy_trunc', drop_path_schedule='uniform'),
}
FFN_TYPES = ('swiglu', 'gelu')
DROP_PATH_SCHEDULES = ('linear', 'uniform')
PRETRAIN_SIZE = 224  # px; the default AS2DRoPE anchor is its grid (14 tokens at patch 16, official s = 224 / H_px)


@MODELS.register_module()
class VisionLLaMA(MaskedAttentionMixin, PlainBackbone):
    """Plain VisionLLaMA backbone.

    Args:
        arch: ``'small' | 'base' | 'large'`` (or ``s/b/l``), or a dict with ``embed_dims``, ``num_layers``,
            ``num_heads`` (optional ``ffn_hidden_dims``).
        img_size: nominal input resolution (the patch grid of ``featmap`` outputs at that size). Any input
            size runs: images are zero-padded bottom/right to a multiple of ``patch_size``. It does *not*
            set the AS2DRoPE anchor (see ``rope_anchor``).
        layout: weight layout preset, see the module docstring. ``ffn_ratio``, ``ffn_bias``,
            ``layer_scale_init_value``, ``ffn_drop_path``, ``cls_rope`` and ``drop_path_schedule`` (``'linear'``:
            0 to ``drop_path_rate`` over the blocks, ``'uniform'``: ``drop_path_rate`` in every block) override
            single fields.
        ffn_type: ``'swiglu'`` (the paper) or ``'gelu'`` (ViT's MLP ``fc2(GELU(fc1(x)))`` with biases and
            ``ffn_ratio * D`` hidden units; Table 7(a)).
        with_cls_token: a class token (it takes part in attention; its RoPE rotation is ``cls_rope``), first in the
            sequence under ``'bidirectional'`` attention and last under a causal ``mask_mode``.
        mask_mode: ``'bidirectional'`` (default: the paper, the official code and the released weights),
            ``'causal'`` (strict, in raster order; SDPA fast path) or ``'official'`` (iLLaMA Eq. 2, the post-softmax
            soft mask of iLLaMA's released code; VisionLLaMA's own code has no mask). ``soft_mask_rate`` (``alpha``,
            0 at build) relaxes the causal modes towards bidirectional; :class:`~mmcausal.engine.SoftMaskHook`
            schedules it. See :mod:`mmcausal.models.layers.attention`.
        rope_mode: ``'as2d'`` (default; positions scaled onto the anchor grid, see ``as2d_scaling``), ``'2d'``
            (integer grid positions, what the official downstream code uses) or ``'1d'`` (flat sequence index,
            for ablations).
        rope_anchor: AS2DRoPE anchor grid in tokens (int or ``(h, w)``): the grid the weights were
            pre-trained on. Default: ``224 // patch_size`` (14 at patch 16), the official anchor; a model
            pre-trained at another size must say so (e.g. 8 for the 64 px / patch 8 twins).
        as2d_scaling: ``'per_axis'`` (default, ours: ``(B_h / H, B_w / W)``, every axis spans the anchor's
            range) or ``'isotropic'`` (paper Eq. 4 and the official code: one scale ``B_h / H`` for both axes);
            see :func:`~mmcausal.models.layers.position.auto_scale`. Both agree on square grids. ``per_axis`` is
            the default from evidence: on the tiny twin trained at 64 px it keeps 8-17 points more top-1 at
            64x96 / 48x128 and 2-6 at 128x48 (docs/models.md, "Resolution generalisation").
        rope_theta: RoPE frequency base (Table 7(d)).
        rope_ratio: fraction of each head's channels that RoPE rotates (Table 7(c); the first ones, as the
            official ``rpe_ratio``), see :mod:`.rope_variants`.
        rope_shared: one RoPE frequency ladder for all heads (True, the paper) or a band of one wider ladder per
            head (False, Table 7(e); global attention only).
        cls_rope: class-token rotation: ``'identity'`` (angle 0), or the official deit quirk of rotating it
            like flat index -1, i.e. column ``W - 1`` and row ``0`` (``'legacy_trunc'``, torch < 1.13) or
            ``-1`` (``'legacy_floor'``).
        window_size: ViTDet windowed attention (tokens per window side) in every block not listed in
            ``global_blocks``; 0 = global attention everywhere. Windowed blocks use window-local RoPE
            positions ``0..ws-1`` (the pre-training grid for ``ws = 14``), global blocks the full grid.
        global_blocks: indices of the blocks that keep global attention when ``window_size > 0``.
        mask_window_padding: mask the zero padding of windows that overhang the grid (False = official).
        out_indices, out_type, final_norm, frozen_stages: as in mmpretrain's ``VisionTransformer``.
            ``'avg_featmap'`` returns ``pool_norm(mean of patch tokens)`` (mmpretrain's ``ln2``).
        drop_path_rate: stochastic depth, spread over the blocks by ``drop_path_schedule``.
        with_cp: gradient checkpointing of every block (trades compute for activation memory).
        norm_cfg, qkv_bias, patch_size, in_channels: as named (LayerNorm eps 1e-6 by default).
    """
    arch_zoo = {
        ('s', 'small'): dict(embed_dims=384, num_layers=12, num_heads=6),
        ('b', 'base'): dict(embed_dims=768, num_layers=12, num_heads=12),
        ('l', 'large'): dict(embed_dims=1024, num_layers=24, num_heads=16),
    }
    stem_parameters = ('cls_token', )

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 img_size: Union[int, Sequence[int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 layout: str = 'clean',
                 ffn_type: str = 'swiglu',
                 with_cls_token: bool = True,
                 mask_mode: str = 'bidirectional',
                 rope_mode: str = 'as2d',
                 rope_anchor: Optional[Union[int, Sequence[int]]] = None,
                 as2d_scaling: str = 'per_axis',
                 rope_theta: float = 10000.,
                 rope_ratio: float = 1.,
                 rope_shared: bool = True,
                 window_size: int = 0,
                 global_blocks: Sequence[int] = (),
                 mask_window_padding: bool = True,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'cls_token',
                 final_norm: bool = True,
                 drop_path_rate: float = 0.,
                 qkv_bias: bool = True,
                 norm_cfg: Optional[dict] = None,
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 ffn_ratio: Optional[float] = None,
                 ffn_bias: Optional[bool] = None,
                 layer_scale_init_value: Optional[float] = None,
                 ffn_drop_path: Optional[bool] = None,
                 cls_rope: Optional[str] = None,
                 drop_path_schedule: Optional[str] = None,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        setting = resolve_arch(arch, self.arch_zoo, ('embed_dims', 'num_layers', 'num_heads'))
        options = self._resolve_layout(layout, ffn_ratio=ffn_ratio, ffn_bias=ffn_bias, cls_rope=cls_rope,
                                       layer_scale_init_value=layer_scale_init_value, ffn_drop_path=ffn_drop_path,
                                       drop_path_schedule=drop_path_schedule)
        self.drop_path_schedule = check_choice('drop_path_schedule', options['drop_path_schedule'],
                                               DROP_PATH_SCHEDULES, BackboneConfigError)
        self.embed_dims = setting['embed_dims']
        self.num_layers = setting['num_layers']
        self._set_mask_mode(mask_mode)
        self.cls_position = cls_position_for(mask_mode) if with_cls_token else None
        self._set_outputs(out_indices, out_type, final_norm, frozen_stages)
        self.with_cp = with_cp
        self.window_size = window_size
        self.global_blocks = self._check_global_blocks(global_blocks, window_size, with_cls_token)
        norm_cfg = norm_cfg or dict(type='LN', eps=1e-6)

        self._build_patch_embed(in_channels, patch_size, img_size)
        default_anchor = max(PRETRAIN_SIZE // patch_size, 1)
        head_dim = check_head_split(self.embed_dims, setting['num_heads'])
        rope_options = dict(mode=rope_mode, anchor=rope_anchor if rope_anchor is not None else default_anchor,
                            as2d_scaling=as2d_scaling, cls_rope=options['cls_rope'], theta=rope_theta,
                            requires_2d=bool(window_size))
        if not rope_shared and window_size:
            raise BackboneConfigError('rope_shared=False (per-head RoPE) needs global attention; set window_size=0.')
        self.rope = GridRoPE(head_dim, **rope_options) if rope_ratio == 1. and rope_shared else \
            PartialGridRoPE(head_dim, setting['num_heads'], rope_ratio, rope_shared, **rope_options)
        self._warn_dense_anchor(default_anchor, patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims)) if with_cls_token else None

        attention = dict(num_heads=setting['num_heads'], qkv_bias=qkv_bias, mask_mode=mask_mode)
        global_mixer = partial(SelfAttention if rope_shared else HeadwiseRoPEAttention, **attention)
        window_mixer = partial(WindowedAttention, window_size=window_size, mask_padding=mask_window_padding,
                               **attention)
        ffn = self._ffn_factory(check_choice('ffn_type', ffn_type, FFN_TYPES, BackboneConfigError), setting,
                                options)
        self.layers = nn.ModuleList(
            TransformerBlock(self.embed_dims, global_mixer if i in self.global_blocks or not window_size
                             else window_mixer, ffn, norm_cfg=norm_cfg,
                             layer_scale_init_value=options['layer_scale_init_value'],
                             ffn_drop_path=options['ffn_drop_path'])
            for i in range(self.num_layers))
        self.drop_path_rate = drop_path_rate
        self.norm = build_norm_layer(norm_cfg, self.embed_dims) if final_norm else nn.Identity()
        self.pool_norm = build_norm_layer(norm_cfg, self.embed_dims) if out_type == 'avg_featmap' else nn.Identity()
        self._freeze_stages()

    def _ffn_factory(self, ffn_type: str, setting: dict, options: dict) -> partial:
        """SwiGLU (``ffn_hidden_dims`` of the arch, else LLaMA's width rule) or ViT's GELU MLP."""
        if ffn_type == 'gelu':
            return partial(gelu_mlp, feedforward_channels=setting.get(
                'ffn_hidden_dims', int(options['ffn_ratio'] * self.embed_dims)))
        return partial(SwiGLUFFN, feedforward_channels=setting.get(
            'ffn_hidden_dims', swiglu_hidden_dims(self.embed_dims, options['ffn_ratio'])),
            bias=options['ffn_bias'], add_identity=False)

    @staticmethod
    def _resolve_layout(layout: str, **overrides) -> dict:
        options = dict(LAYOUTS[check_choice('VisionLLaMA layout', layout, LAYOUTS, BackboneConfigError)])
        options.update({key: value for key, value in overrides.items() if value is not None})
        return options

    def _check_global_blocks(self, global_blocks: Sequence[int], window_size: int, with_cls: bool) -> Tuple[int, ...]:
        blocks = tuple(sorted(i + self.num_layers if i < 0 else i for i in global_blocks))
        if any(not 0 <= i < self.num_layers for i in blocks):
            raise BackboneConfigError(f'global_blocks {list(global_blocks)} out of range for {self.num_layers} blocks.')
        if window_size < 0:
            raise BackboneConfigError(f'window_size must be >= 0 (0 = global attention), got {window_size}.')
        if window_size and with_cls:
            raise BackboneConfigError('Windowed attention cannot place a class token; set with_cls_token=False.')
        return blocks

    def _warn_dense_anchor(self, default: int, patch_size: int) -> None:
        """Warn when a dense (``featmap``) AS2DRoPE backbone anchors at its own input grid (other than the
        default ``default x default``): at that size AS2DRoPE is plain 2D RoPE, not positions rescaled onto the
        pre-training grid."""
        anchored_at_input = tuple(self.rope_anchor) == tuple(self.patch_resolution) != (default, default)
        if self.rope_mode == 'as2d' and self.out_type == 'featmap' and anchored_at_input:
            warnings.warn(
                f'VisionLLaMA: rope_mode="as2d" with rope_anchor={self.rope_anchor} equal to the input grid of '
                f'img_size, so AS2DRoPE is plain 2D RoPE at that size. Set rope_anchor to the grid the weights '
                f'were pre-trained on (e.g. {default} for {PRETRAIN_SIZE} px at patch {patch_size}); keep it only '
                'if they were pre-trained at this grid.', UserWarning, stacklevel=3)

    # ------------------------------------------------------------------ RoPE policy (owned by ``self.rope``)
    @property
    def rope_mode(self) -> str:
        """``'as2d' | '2d' | '1d'``; switchable at run time (see :class:`~mmcausal.models.layers.GridRoPE`)."""
        return self.rope.mode

    @rope_mode.setter
    def rope_mode(self, rope_mode: str) -> None:
        self.rope.mode = rope_mode

    @property
    def rope_anchor(self) -> Tuple[int, int]:
        """AS2DRoPE anchor grid ``(B_h, B_w)`` in tokens."""
        return self.rope.anchor

    @rope_anchor.setter
    def rope_anchor(self, anchor: Union[int, Sequence[int]]) -> None:
        self.rope.anchor = anchor

    @property
    def as2d_scaling(self) -> str:
        """``'isotropic' | 'per_axis'``: how AS2DRoPE scales a grid onto the anchor."""
        return self.rope.as2d_scaling

    @as2d_scaling.setter
    def as2d_scaling(self, scaling: str) -> None:
        self.rope.as2d_scaling = scaling

    def token_layout(self, grid: Tuple[int, int], device: torch.device) -> TokenLayout:
        """The position context of the full sequence on a ``(H, W)`` patch grid."""
        return TokenLayout(grid, self.cls_position, self.rope.sequence_angles(grid, self.cls_position, device),
                           self.rope)

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """``(B, C, H, W)`` images -> one output per ``out_indices`` entry (shapes: see ``out_type``)."""
        check_image_batch(x, self.in_channels)
        patches, grid = self.patch_embed(x)
        tokens = insert_cls_token(patches, self.cls_token, self.cls_position) if self.cls_position else patches
        return self.run_layers(tokens, self.token_layout(grid, x.device))
