"""Pyramid VisionLLaMA (Chu et al. 2024, "VisionLLaMA", Sec. 3.2): Twins-SVT stages of LLaMA blocks.

Four stages; each embeds the previous map with a strided conv + LayerNorm (patch 4, then 2) and stacks blocks that
alternate locally-grouped attention (LSA: ``7 x 7`` windows, window-local 2D RoPE) and global sub-sampled attention
(GSA: keys/values from an ``sr x sr`` strided conv, 2D RoPE on queries and keys at their own positions, optionally
auto-scaled), each followed by a bias-free SwiGLU, with LayerScale 1e-4 and LayerNorm eps 1e-5 (the official
``PyramidVisionLLaMA`` in ``deit/my_models.py``). No class token and, by default, no absolute position embedding
and no PEG (``abs_pos_embed`` and ``peg`` add them, the ablation of paper Table 7(g): :mod:`.absolute_position`).

RoPE per stage (:class:`~mmcausal.models.layers.GridRoPE`, one per stage): ``rope_mode='as2d'`` scales the GSA
positions onto an anchor grid; ``rope_anchor='per_stage'`` (default) anchors each stage at its grid for 224 px
(56, 28, 14, 7 tokens), where AS2DRoPE equals the plain 2D RoPE the ImageNet weights were trained with;
``rope_anchor=14`` is the official dense fine-tuning (14 tokens for every stage, isotropic: ``GSAttention``'s
``base_size=14`` in the official ``twins_llama.py``). LSA windows always use window-local integer positions.

Attention is bidirectional only (``mask_mode``). No mask makes this pyramid causal in raster order, whatever its mixers:

* the patch merging between stages (a stride-2 convolution) builds coarse token ``(i, j)`` from the ``2 x 2`` cell
  of fine rows ``2i`` and ``2i + 1``; under a causal mask fine token ``(2i + 1, 0)`` has seen the whole fine row
  ``2i``, which holds the cells of the later coarse tokens ``(i, j' > j)``, so coarse token ``(i, 0)`` depends on them;
* GSA keys are ``sr x sr`` cells: every cell that holds the query also holds tokens after it, and for the queries of
  the first cell row no cell lies wholly before them (their rows would have no key left).


LSA alone would stay causal: a window's raster order is the image's raster order restricted to the window (the plain
:class:`~mmcausal.models.VisionLLaMA` with ``window_size`` is causal that way). A causal pyramid would need
another token order (e.g. Z order, in which every ``2 x 2`` cell is consecutive) and GSA keys limited to whole earlier
cells; that is a different model, not built here.
"""
from functools import partial
from typing import List, Optional, Sequence, Tuple, Union

from mmengine.model import BaseModule, ModuleList
from mmpretrain.models.backbones.base_backbone import BaseBackbone
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.validation import check_choice
from ..layers import (
    BackboneConfigError,
    BlockStackMixin,
    GridRoPE,
    MaskModeMixin,
    SwiGLUFFN,
    TokenLayout,
    TransformerBlock,
    build_norm_layer,
    build_patch_embed,
    check_image_batch,
    resolve_arch,
    swiglu_hidden_dims,
    tokens_to_featmap,
)
from .absolute_position import LearnedPositionEmbedding, PositionEncodingGenerator
from .twins_attention import SubsampledAttention, WindowedAttention


class PyramidStage(BaseModule):
    """One stage of a :class:`PyramidBackbone`: ``patch_embed`` (``(B, C, H, W) -> (B, h*w, D), (h, w)``, e.g. mmcv
    ``PatchEmbed`` with its norm), ``blocks`` and ``norm`` (``nn.Identity`` without ``norm_after_stage``); optionally
    ``pos_embed`` (added after the patch embedding) and ``peg`` (after the first block), both ``(tokens, grid) ->
    tokens``, else None."""

    def __init__(self, patch_embed: nn.Module, blocks: Sequence[nn.Module], norm: Optional[nn.Module] = None,
                 pos_embed: Optional[nn.Module] = None, peg: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.patch_embed = patch_embed
        self.pos_embed = pos_embed
        self.blocks = nn.ModuleList(blocks)
        self.peg = peg
        self.norm = norm if norm is not None else nn.Identity()


class PyramidBackbone(BlockStackMixin, BaseBackbone):
    """Base of the stage-based backbones: ``stages`` (:class:`PyramidStage`), an optional final ``norm`` and
    ``pool_norm`` after the last stage.

    Each stage embeds the previous feature map, runs its blocks with the :class:`TokenLayout` that
    :meth:`stage_layout` builds for its grid, applies its norm and becomes the ``(B, D_s, H_s, W_s)`` map of the
    next stage. Subclasses set ``in_channels``, ``stages``, ``norm``, ``pool_norm`` and call :meth:`_set_outputs` /
    :meth:`_freeze_stages` in ``__init__``.

    Output types: ``'featmap'`` the map of every stage in ``out_indices`` (dense prediction); ``'avg_featmap'``
    ``pool_norm(mean of norm(tokens))`` of those stages (classification; the final ``norm`` applies to the last
    stage only).
    """
    out_types = ('featmap', 'avg_featmap')

    def stage_layout(self, index: int, grid: Tuple[int, int], tokens: Tensor) -> TokenLayout:
        """The position context of stage ``index`` at grid ``(H, W)`` (e.g. its own RoPE policy)."""
        raise NotImplementedError

    def blocks(self) -> List[nn.Module]:
        return [block for stage in self.stages for block in stage.blocks]

    def _set_outputs(self, out_indices: Union[int, Sequence[int]], out_type: str, frozen_stages: int) -> None:
        check_choice('out_type', out_type, self.out_types, BackboneConfigError)
        self.out_indices = sorted(self._normalise_indices(out_indices, len(self.stages), 'stages'))
        self.out_type = out_type
        self.frozen_stages = frozen_stages

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """``(B, C, H, W)`` images -> one output per stage in ``out_indices`` (see ``out_type``)."""
        check_image_batch(x, self.in_channels)
        outs: List[Tensor] = []
        for index, stage in enumerate(self.stages):
            tokens, grid = stage.patch_embed(x)
            if stage.pos_embed is not None:
                tokens = stage.pos_embed(tokens, grid)
            layout = self.stage_layout(index, grid, tokens)
            for position, block in enumerate(stage.blocks):
                tokens = self._run_block(block, tokens, layout)
                if position == 0 and stage.peg is not None:
                    tokens = stage.peg(tokens, grid)
            tokens = stage.norm(tokens)
            if index == len(self.stages) - 1:
                tokens = self.norm(tokens)
            x = tokens_to_featmap(tokens, grid)
            if index in self.out_indices:
                outs.append(x if self.out_type == 'featmap' else self.pool(tokens))
        return tuple(outs)

    def pool(self, tokens: Tensor) -> Tensor:
        """``(B, N, D)`` tokens of a stage -> ``pool_norm(mean)`` ``(B, D)`` (the ``avg_featmap`` output)."""
        return self.pool_norm(tokens.mean(dim=1))

    def _freeze_stages(self) -> None:
        """``frozen_stages = k >= 0``: freeze the first patch embedding (with its position table, if any) and the
        whole first ``k`` stages (and the final norms when every stage is frozen)."""
        if self.frozen_stages < 0:
            return
        stem = [self.stages[0].patch_embed, self.stages[0].pos_embed]
        frozen = [module for module in stem if module is not None] + list(self.stages[:self.frozen_stages])
        if self.frozen_stages >= len(self.stages):
            frozen += [self.norm, self.pool_norm]
        self._freeze(frozen)

    def get_layer_depth(self, param_name: str, prefix: str = '') -> Tuple[int, int]:
        """Layer id for layer-wise lr decay, counting blocks across stages: the first patch embedding 0, block
        ``j`` of stage ``s`` -> ``1 + (blocks before stage s) + j``, a later patch embedding the id of its
        stage's first block (a position embedding that of its patch embedding, a PEG that of the block before it), a
        stage norm the id of its last block, everything else ``L + 1``."""
        depths = [len(stage.blocks) for stage in self.stages]
        num_layers = sum(depths) + 2
        if not param_name.startswith(prefix + 'stages.'):
            return num_layers - 1, num_layers
        stage, part, *rest = param_name[len(prefix + 'stages.'):].split('.')
        first = 1 + sum(depths[:int(stage)])
        if part in ('patch_embed', 'pos_embed'):
            return (0 if stage == '0' else first), num_layers
        if part == 'peg':
            return first, num_layers
        if part == 'blocks':
            return first + int(rest[0]), num_layers
        return first + depths[int(stage)] - 1, num_layers


PRETRAIN_SIZE = 224  # px: the ImageNet resolution; 'per_stage' anchors default to its grid at every stride


@MODELS.register_module()
class PyramidVisionLLaMA(MaskModeMixin, PyramidBackbone):
    """Pyramid VisionLLaMA backbone (Twins-SVT layout with LLaMA blocks).

    Args:
        arch: ``'small' | 'base' | 'large'`` (or ``s/b/l``), or a dict of per-stage lists ``embed_dims``,
            ``num_heads``, ``depths`` (optional ``ffn_hidden_dims``).
        in_channels: image channels.
        patch_sizes: patch-embedding stride of each stage (4, 2, 2, 2).
        window_size: LSA window (tokens per side).
        sr_ratios: GSA key/value reduction of each stage (8, 4, 2, 1).
        gsa_key_pos: ``'fixed'`` (default; keys at the centres of their cells) or ``'official'`` (the released
            weights' formula, the official ``GSAttention``'s; needed to reproduce them).
        rope_mode: ``'as2d'`` (default) or ``'2d'``; GSA positions only, LSA is window-local.
        rope_anchor: ``'per_stage'`` (default: ``pretrain_size / stride`` tokens per stage) or an int / pair used
            for every stage (14 = the official dense configs).
        pretrain_size: the image size (px) the weights were pre-trained at (224 for ImageNet; 64 for the twins).
        as2d_scaling: ``'per_axis'`` (default) or ``'isotropic'`` (paper Eq. 4 and the official code).
        mask_window_padding: hide the zero padding of overhanging LSA windows from the keys (False = official).
        mask_mode: ``'bidirectional'`` only (the paper and the released weights). ``'causal'`` and ``'official'`` are
            refused: the patch merging and the GSA keys mix tokens across raster rows (module docstring).
        layer_scale_init_value: LayerScale initial value (1e-4 in the official models; 0 disables it).
        out_indices: stages whose output is returned.
        out_type: ``'featmap'`` ``(B, D_s, H_s, W_s)`` per stage, or ``'avg_featmap'`` ``(B, D_s)`` for
            classification.
        norm_after_stage: a new LayerNorm after every stage (the official dense backbones).
        final_norm: LayerNorm after the last stage (the official classifier's ``norm``).
        official_double_norm: the released classifier's ``norm(mean(norm(x)))`` (official ``deit/my_models.py``):
            the final norm is applied again to the pooled vector. Only with ``out_type='avg_featmap'`` and
            ``final_norm``.
        abs_pos_embed: DeiT's learnable absolute position embedding, added to the first stage's tokens, for its
            grid at ``pretrain_size`` (resized for other grids); Table 7(g) "+ LPE".
        peg: CPVT's positional encoding generator after the first block of every stage; Table 7(g) "+ PEG".
        drop_path_rate: stochastic depth, linear over all blocks of all stages.
        frozen_stages, with_cp, norm_cfg, rope_theta: as in the other backbones (LayerNorm eps 1e-5).
    """
    arch_zoo = {
        ('s', 'small'): dict(embed_dims=[64, 128, 256, 512], num_heads=[2, 4, 8, 16], depths=[2, 2, 10, 4]),
        ('b', 'base'): dict(embed_dims=[96, 192, 384, 768], num_heads=[3, 6, 12, 24], depths=[2, 2, 18, 2]),
        ('l', 'large'): dict(embed_dims=[128, 256, 512, 1024], num_heads=[4, 8, 16, 32], depths=[2, 2, 18, 2]),
    }
    refused_mask_modes = dict.fromkeys(
        ('causal', 'official'),
        'its patch merging makes each coarse token from a 2x2 cell of two raster rows and its GSA keys from sr x sr '
        'cells, so later tokens always leak in; use VisionLLaMA (plain, optionally windowed) for causal attention.')

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 in_channels: int = 3,
                 patch_sizes: Sequence[int] = (4, 2, 2, 2),
                 window_size: int = 7,
                 sr_ratios: Sequence[int] = (8, 4, 2, 1),
                 gsa_key_pos: str = 'fixed',
                 rope_mode: str = 'as2d',
                 rope_anchor: Union[str, int, Sequence[int]] = 'per_stage',
                 pretrain_size: int = PRETRAIN_SIZE,
                 as2d_scaling: str = 'per_axis',
                 rope_theta: float = 10000.,
                 mask_window_padding: bool = True,
                 mask_mode: str = 'bidirectional',
                 layer_scale_init_value: float = 1e-4,
                 out_indices: Union[int, Sequence[int]] = (0, 1, 2, 3),
                 out_type: str = 'featmap',
                 norm_after_stage: bool = True,
                 final_norm: bool = False,
                 official_double_norm: bool = False,
                 abs_pos_embed: bool = False,
                 peg: bool = False,
                 drop_path_rate: float = 0.,
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 norm_cfg: Optional[dict] = None,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        # the official ``PyramidVisionLLaMA._init_weights``: Linear TruncNormal(0.02),
        # Conv2d N(0, sqrt(2 / fan_out)), LN 1/0
        if init_cfg is None:
            init_cfg = [dict(type='TruncNormal', layer='Linear', std=.02, bias=0.),
                        dict(type='Kaiming', layer='Conv2d', mode='fan_out', nonlinearity='relu',
                             distribution='normal', bias=0.)]
        super().__init__(init_cfg=init_cfg)
        self._set_mask_mode(mask_mode)
        setting = resolve_arch(arch, self.arch_zoo, ('embed_dims', 'num_heads', 'depths'))
        dims, heads, depths = setting['embed_dims'], setting['num_heads'], setting['depths']
        hidden = setting.get('ffn_hidden_dims', [swiglu_hidden_dims(dim) for dim in dims])
        if not len(dims) == len(heads) == len(depths) == len(hidden) == len(patch_sizes) == len(sr_ratios):
            raise BackboneConfigError(f'Every per-stage setting needs one entry per stage: embed_dims {dims}, '
                                      f'num_heads {heads}, depths {depths}, patch_sizes {list(patch_sizes)}, '
                                      f'sr_ratios {list(sr_ratios)}.')
        if official_double_norm and not (final_norm and out_type == 'avg_featmap'):
            raise BackboneConfigError('official_double_norm re-applies the final norm to the pooled vector; it needs '
                                      'final_norm=True and out_type="avg_featmap".')
        self.in_channels = in_channels
        self.with_cp = with_cp
        self.official_double_norm = official_double_norm
        norm_cfg = norm_cfg or dict(type='LN', eps=1e-5)

        strides = [patch_sizes[0]]
        for patch in patch_sizes[1:]:
            strides.append(strides[-1] * patch)
        self.ropes = nn.ModuleList(
            GridRoPE(dim // head, mode=rope_mode, theta=rope_theta, as2d_scaling=as2d_scaling, requires_2d=True,
                     anchor=max(pretrain_size // stride, 1) if rope_anchor == 'per_stage' else rope_anchor)
            for dim, head, stride in zip(dims, heads, strides))

        stages = []
        for index, (dim, head, depth) in enumerate(zip(dims, heads, depths)):
            embed = build_patch_embed(in_channels if index == 0 else dims[index - 1], dim, patch_sizes[index],
                                      norm_cfg=norm_cfg)
            lsa = partial(WindowedAttention, num_heads=head, window_size=window_size, mask_padding=mask_window_padding,
                          mask_mode=mask_mode)
            gsa = partial(SubsampledAttention, num_heads=head, sr_ratio=sr_ratios[index], key_pos=gsa_key_pos,
                          norm_cfg=norm_cfg)
            ffn = partial(SwiGLUFFN, feedforward_channels=hidden[index], bias=False, add_identity=False)
            blocks = [TransformerBlock(dim, gsa if j % 2 else lsa, ffn, norm_cfg=norm_cfg,
                                       layer_scale_init_value=layer_scale_init_value) for j in range(depth)]
            norm = build_norm_layer(norm_cfg, dim) if norm_after_stage else None
            grid = (max(pretrain_size // strides[0], 1), ) * 2
            pos_embed = LearnedPositionEmbedding(dim, grid) if abs_pos_embed and index == 0 else None
            stages.append(PyramidStage(embed, blocks, norm, pos_embed, PositionEncodingGenerator(dim) if peg else None))
        self.stages = ModuleList(stages)  # mmengine's: init_weights reaches the stages (the PEG's own rule)
        self.drop_path_rate = drop_path_rate
        self.norm = build_norm_layer(norm_cfg, dims[-1]) if final_norm else nn.Identity()
        self.pool_norm = nn.Identity()
        self._set_outputs(out_indices, out_type, frozen_stages)
        if official_double_norm and self.out_indices != [len(self.stages) - 1]:
            raise BackboneConfigError(f'official_double_norm re-applies the last stage\'s final norm to its pooled '
                                      f'vector; it needs out_indices=({len(self.stages) - 1}, ) (the last stage), got '
                                      f'{tuple(self.out_indices)}. Set official_double_norm=False for other stages.')
        self._freeze_stages()

    def stage_layout(self, index: int, grid: Tuple[int, int], tokens: Tensor) -> TokenLayout:
        """Stage ``index``'s RoPE policy and the (possibly auto-scaled) query angles of its grid."""
        rope = self.ropes[index]
        return TokenLayout(grid, None, rope.sequence_angles(grid, None, tokens.device), rope)

    def pool(self, tokens: Tensor) -> Tensor:
        """Mean of the stage's tokens; with ``official_double_norm`` the final norm again on top."""
        pooled = super().pool(tokens)
        return self.norm(pooled) if self.official_double_norm else pooled
