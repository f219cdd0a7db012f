"""CaiT: "Going deeper with Image Transformers" (Touvron et al., ICCV 2021; official ``cait_models.py`` in
facebookresearch/deit).

Patches ``x = PatchEmbed(img) + pos_embed`` (a ``(1, N, C)`` table without a class row, resized to the actual
grid), then ``L`` self-attention blocks with talking-heads attention, LayerScale (Sec. 2, Eq. 4) and a GELU MLP,
all pre-norm with LayerNorm (eps 1e-6) and the same drop-path rate in every block (Sec. 4.1.1). The class token
joins only afterwards: two class-attention blocks (Sec. 3) read the fixed patch tokens, then ``norm`` and the
classifier (an mmpretrain ``LinearClsHead``) take the class token.

Attention is bidirectional (``mask_mode='bidirectional'``, the paper and every released weight) or causal in
raster order (``'causal'``): the talking-heads mask is exact (:mod:`~.talking_heads`), patch
``t`` sees patches ``s <= t`` in every SA block. The class token needs no move: it is not in the SA sequence, and
each class-attention block reads every patch token, so the class feature sees every patch in both modes.
``'official'`` (iLLaMA's post-softmax mask) is refused: it is not defined for talking heads.

Dense use: the SA blocks' patch tokens are the features (stride 16); the class-attention stage never
changes them and is built only for ``out_type='cls_token'``. The official final ``norm`` only ever normalised the
class token, so dense features are un-normalised unless ``feature_norm='final'`` says otherwise.

Class attention (Sec. 3, Eq. 5-9, the official ``Class_Attention`` / ``LayerScale_Block_CA``): a class token reads
the patch tokens, which stay as they are. With ``u = [x_cls; x_1 .. x_N]`` and ``z = LN1(u)`` (each CA block's own
norm, per token)::

    q = W_q z_cls,  k = W_k z,  v = W_v z              (heads h, head dim d, scale d^-1/2; no talking heads)
    x_cls <- x_cls + g1 * proj(softmax(q k^T / sqrt(d)) v)
    x_cls <- x_cls + g2 * MLP(LN2(x_cls))              (the FFN sees the class token only)

``g1``, ``g2`` are LayerScale vectors. :class:`ClassAttentionStage` stacks such blocks on a learned class token; the
backbone ends with one, and :class:`~mmcausal.models.necks.ClassAttentionPool` puts one on any backbone.

The paper's ablations (Tables 1, 2 and 8: from DeiT-S to CaiT) are options of the same backbone: ``attn_type``
(talking heads or plain multi-head attention), ``residual_scale`` / ``branch_init`` (LayerScale, a scalar per branch
as ReZero / Fixup / T-Fixup, or none: :mod:`.residual_scaling`), ``cls_insert_layer`` (no class-attention stage: the
class token joins the patch sequence before SA block ``k``, ViT / DeiT at ``k = 0``) and ``drop_path_schedule``
(uniform or DeiT's linear ramp).
"""
from functools import partial
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.validation import check_choice
from ..layers import (
    EXPLICIT_ATTENTION,
    AttentionProbe,
    BackboneConfigError,
    MaskModeMixin,
    PlainBackbone,
    SelfAttention,
    TokenLayout,
    TransformerBlock,
    build_norm_layer,
    check_head_split,
    check_image_batch,
    explicit_attention,
    gelu_mlp,
    resize_pos_embed,
    resolve_arch,
)
from .residual_scaling import BRANCH_INITS, fixup_init, set_residual_scale, t_fixup_init
from .talking_heads import TalkingHeadsAttention

FEATURE_NORMS = ('none', 'final')
ATTN_TYPES = ('talking_heads', 'multi_head')
DROP_PATH_SCHEDULES = ('uniform', 'linear')


class ClassAttention(nn.Module):
    """Attention of the first token (the class token) over all tokens: ``(B, 1 + N, C) -> (B, 1, C)``.

    Separate ``q``, ``k``, ``v`` and ``proj`` Linears with biases (the official layout); one SDPA call, O(N). Under
    :func:`explicit_attention_mode` the ``(B, heads, 1, 1 + N)`` weights pass through ``attn_probe``.
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True) -> None:
        super().__init__()
        check_head_split(embed_dims, num_heads)
        self.num_heads = num_heads
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.k = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.v = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.attn_probe = AttentionProbe()

    def forward(self, tokens: Tensor) -> Tensor:
        """``tokens`` ``(B, 1 + N, C)`` with the class token first -> its update ``(B, 1, C)``."""
        batch, num_tokens, embed_dims = tokens.shape

        def heads(x: Tensor) -> Tensor:
            return x.view(batch, x.shape[1], self.num_heads, -1).transpose(1, 2)

        q, k, v = heads(self.q(tokens[:, :1])), heads(self.k(tokens)), heads(self.v(tokens))
        out = explicit_attention(q, k, v, probe=self.attn_probe) if EXPLICIT_ATTENTION.get() else \
            F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, 1, embed_dims))

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}'


class ClassAttentionBlock(TransformerBlock):
    """One CA block (module docstring): ``(x_cls (B, 1, C), patches (B, N, C)) -> x_cls``; the patches are read,
    never written. Submodules ``norm1``, ``attn`` (:class:`ClassAttention`), ``ls1``, ``norm2``, ``ffn`` (GELU MLP,
    ``mlp_ratio * C`` wide), ``ls2``; drop path 0 (the official CA blocks have none) unless set."""

    def __init__(self, embed_dims: int, num_heads: int, mlp_ratio: float = 4., layer_scale_init_value: float = 1e-5,
                 norm_cfg: Optional[dict] = None) -> None:
        super().__init__(embed_dims, partial(ClassAttention, num_heads=num_heads),
                         partial(gelu_mlp, feedforward_channels=int(mlp_ratio * embed_dims)),
                         norm_cfg=norm_cfg or dict(type='LN', eps=1e-6),
                         layer_scale_init_value=layer_scale_init_value)

    def forward(self, cls_token: Tensor, patches: Tensor) -> Tensor:
        """New class token ``(B, 1, C)`` from the class token and the ``(B, N, C)`` patch tokens."""
        cls_token = self.drop_path.residual(cls_token,
                                            self.ls1(self.attn(self.norm1(torch.cat((cls_token, patches), dim=1)))))
        return self.drop_path.residual(cls_token, self.ls2(self.ffn(self.norm2(cls_token))))


class ClassAttentionStage(BaseModule):
    """A learned class token (``cls_token``, ``(1, 1, C)``) through ``num_layers`` :class:`ClassAttentionBlock` s
    (``layers``) over fixed patch tokens: ``(B, N, C) -> (B, C)``, before any final norm.

    Args:
        embed_dims: ``C``.
        num_heads: heads of the class attention.
        num_layers: CA blocks (2 in every CaiT).
        mlp_ratio: FFN width / ``C``.
        layer_scale_init_value: initial LayerScale.
        norm_cfg: norm of the blocks (LayerNorm, eps 1e-6, by default).
    """

    def __init__(self, embed_dims: int, num_heads: int, num_layers: int = 2, mlp_ratio: float = 4.,
                 layer_scale_init_value: float = 1e-5, norm_cfg: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.layers = ModuleList(
            ClassAttentionBlock(embed_dims, num_heads, mlp_ratio, layer_scale_init_value, norm_cfg)
            for _ in range(num_layers))

    def init_weights(self) -> None:
        """``cls_token`` ~ TruncNormal(0.02) (the official init), then ``init_cfg``."""
        if not self.is_init:
            trunc_normal_(self.cls_token, std=.02)
        super().init_weights()

    def forward(self, patches: Tensor) -> Tensor:
        """``(B, N, C)`` patch tokens -> class feature ``(B, C)``."""
        cls_token = self.cls_token.expand(patches.shape[0], -1, -1)
        for layer in self.layers:
            cls_token = layer(cls_token, patches)
        return cls_token[:, 0]


@MODELS.register_module()
class CaiT(MaskModeMixin, PlainBackbone):
    """CaiT backbone.

    Args:
        arch: ``'xxs24' | 'xxs36' | 'xs24' | 's24' | 's36' | 'm36' | 'm48'`` (released) or the paper-only
            ``'xs36' | 's48' | 'm24'``, or a dict with ``embed_dims``, ``num_layers``, ``num_heads`` (optional
            ``layer_scale_init_value``, ``mlp_ratio`` (4), ``num_cls_layers`` (2)).
        img_size: resolution the position table was trained at (224, 384 or 448 for the released models); any
            input size runs, the table is resized (bicubic) to the actual ``ceil(H/p) x ceil(W/p)`` grid
            (``p = patch_size``).
        out_indices: SA blocks whose output is returned (negative allowed).
        out_type: ``'cls_token'`` ``(B, C)``: the class-attention stage and ``norm`` on the block's tokens (at the
            last block: the classifier's feature; earlier: a class-attention readout of that block);
            ``'featmap'`` ``(B, C, H, W)`` / ``'raw'`` ``(B, N, C)`` patch tokens;
            ``'avg_featmap'`` ``(B, C)`` mean of the ``norm``-ed patch tokens (timm ``global_pool='avg'``).
        feature_norm: norm of ``'featmap'`` / ``'raw'`` outputs: ``'none'`` (default) or ``'final'`` (``norm``,
            which the official model only ever applied to the class token).
        drop_rate: dropout after the position embedding (0 in every recipe; the official ``drop_rate`` also feeds
            the MLP and projection dropouts, which are left out here).
        drop_path_rate: stochastic depth of **every** SA block (uniform, Sec. 4.1.1); the CA blocks have none.
        layer_scale_init_value: LayerScale init; None = the arch's (official code: 1e-5 up to 24 blocks, 1e-6
            deeper, but 1e-5 for XXS-36, whose paper value is 1e-6).
        mask_mode: ``'bidirectional'`` (default: the paper and the released weights) or ``'causal'`` (patch ``t``
            sees patches ``s <= t`` in raster order in every SA block; the class-attention stage still reads every
            patch). ``'official'`` is refused (module docstring).
        attn_impl: talking-heads path: ``'auto'`` (the fused explicit path while tokens <= 2 x width, i.e. at 224
            and 384 px, SDPA beyond; with a key mask or causal: explicit while tokens <= width),
            ``'sdpa'`` (O(N) memory, ``heads`` x the attention FLOPs) or ``'explicit'`` (the reference); all exact.
        attn_type: mixer of the SA blocks: ``'talking_heads'`` (CaiT, Sec. 4.3) or ``'multi_head'`` (plain
            multi-head attention, DeiT; Table 8 starts from it).
        residual_scale: weighting of every residual branch (SA and CA blocks): ``'layerscale'`` (Eq. 4, the default),
            ``'scalar'`` (one learned ``alpha`` per branch, Table 1's ReZero / Fixup / T-Fixup / ``alpha = eps``) or
            ``'none'`` (DeiT); ``layer_scale_init_value`` is the initial ``lambda`` or ``alpha``
            (:mod:`.residual_scaling`).
        branch_init: ``'default'`` (TruncNormal 0.02), ``'fixup'`` or ``'t-fixup'`` (the adapted methods of Table 1,
            :mod:`.residual_scaling`) for the SA blocks; applied after the default init, never over a ``Pretrained``
            one.
        cls_insert_layer: None (CaiT: the class-attention stage after the SA blocks) or ``k`` in ``[0, L)``: no
            class-attention stage, the class token (no position) is prepended to the patch tokens before SA block
            ``k`` and read after the last block (Table 2; ``k = 0`` is ViT / DeiT). Bidirectional attention only.
        drop_path_schedule: ``'uniform'`` (every SA block ``drop_path_rate``, Sec. 4.1.1) or ``'linear'`` (block ``i``
            of ``L``: ``drop_path_rate * i / (L - 1)``, DeiT).
        norm_cfg: norm of every block and of ``norm`` (LayerNorm eps 1e-6, as all released models).
        frozen_stages: freeze the patch embedding, position table and the first ``frozen_stages`` SA blocks (all
            of them: the class stage and ``norm`` too).
        with_cp: gradient checkpointing of every SA block.
        patch_size, in_channels, init_cfg: as named.

    Layer ids for layer-wise lr decay (:meth:`get_layer_depth`): patch embedding and position table 0, SA block ``i``
    ``i + 1``, the class stage (its class token included) and ``norm`` on top, with the head.
    """
    arch_zoo = {
        ('xxs24', ): dict(embed_dims=192, num_layers=24, num_heads=4, layer_scale_init_value=1e-5),
        ('xxs36', ): dict(embed_dims=192, num_layers=36, num_heads=4, layer_scale_init_value=1e-5),
        ('xs24', ): dict(embed_dims=288, num_layers=24, num_heads=6, layer_scale_init_value=1e-5),
        ('xs36', ): dict(embed_dims=288, num_layers=36, num_heads=6, layer_scale_init_value=1e-6),
        ('s24', ): dict(embed_dims=384, num_layers=24, num_heads=8, layer_scale_init_value=1e-5),
        ('s36', ): dict(embed_dims=384, num_layers=36, num_heads=8, layer_scale_init_value=1e-6),
        ('s48', ): dict(embed_dims=384, num_layers=48, num_heads=8, layer_scale_init_value=1e-6),
        ('m24', ): dict(embed_dims=768, num_layers=24, num_heads=16, layer_scale_init_value=1e-5),
        ('m36', ): dict(embed_dims=768, num_layers=36, num_heads=16, layer_scale_init_value=1e-6),
        ('m48', ): dict(embed_dims=768, num_layers=48, num_heads=16, layer_scale_init_value=1e-6),
    }
    refused_mask_modes = {
        'official': "iLLaMA's post-softmax mask (no renormalisation) is not defined for talking-heads attention, "
                    'which mixes the heads after the softmax and adds a bias over the keys, and no CaiT weights were '
                    'trained with it; use "causal" (strict) or "bidirectional".'}
    stem_parameters = ('pos_embed', 'cls_token')  # cls_token: only with ``cls_insert_layer``
    has_cls_token = True  # it joins after the SA blocks (class attention) or, with cls_insert_layer, before block k
    drop_path_schedule = 'uniform'

    def __init__(self,
                 arch: Union[str, dict] = 's24',
                 img_size: Union[int, Tuple[int, int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'cls_token',
                 feature_norm: str = 'none',
                 drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 layer_scale_init_value: Optional[float] = None,
                 attn_impl: str = 'auto',
                 mask_mode: str = 'bidirectional',
                 attn_type: str = 'talking_heads',
                 residual_scale: str = 'layerscale',
                 branch_init: str = 'default',
                 cls_insert_layer: Optional[int] = None,
                 drop_path_schedule: str = 'uniform',
                 norm_cfg: Optional[dict] = None,
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self._set_mask_mode(mask_mode)
        setting = resolve_arch(arch, self.arch_zoo, ('embed_dims', 'num_layers', 'num_heads'))
        self.embed_dims = setting['embed_dims']
        self.num_layers = setting['num_layers']
        self.feature_norm = check_choice('feature_norm', feature_norm, FEATURE_NORMS, BackboneConfigError)
        self._set_outputs(out_indices, out_type, feature_norm == 'final', frozen_stages)
        norm_cfg = norm_cfg or dict(type='LN', eps=1e-6)
        if layer_scale_init_value is None:
            layer_scale_init_value = setting.get('layer_scale_init_value', 1e-5)
        mlp_dims = int(setting.get('mlp_ratio', 4.) * self.embed_dims)

        check_choice('attn_type', attn_type, ATTN_TYPES, BackboneConfigError)
        self.branch_init = check_choice('branch_init', branch_init, BRANCH_INITS, BackboneConfigError)
        if branch_init != 'default' and (residual_scale != 'scalar' or layer_scale_init_value == 0):
            raise BackboneConfigError(f'branch_init={branch_init!r} is the paper\'s adaptation with a learned scalar '
                                      f'alpha per branch: set residual_scale="scalar" and a non-zero '
                                      f'layer_scale_init_value (alpha), got {residual_scale!r} and '
                                      f'{layer_scale_init_value}.')
        self.drop_path_schedule = check_choice('drop_path_schedule', drop_path_schedule, DROP_PATH_SCHEDULES,
                                               BackboneConfigError)
        self.cls_insert_layer = self._check_insert_layer(cls_insert_layer, mask_mode, out_type)

        self._build_patch_embed(in_channels, patch_size, img_size)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_resolution[0] * self.patch_resolution[1],
                                                  self.embed_dims))
        self._register_load_state_dict_pre_hook(self._resize_loaded_pos_embed)
        self.pos_drop = nn.Dropout(drop_rate)
        if attn_type == 'talking_heads':
            mixer = partial(TalkingHeadsAttention, num_heads=setting['num_heads'], impl=attn_impl,
                            mask_mode=mask_mode)
        else:
            mixer = partial(SelfAttention, num_heads=setting['num_heads'], mask_mode=mask_mode)
        self.layers = nn.ModuleList(
            TransformerBlock(self.embed_dims, mixer, partial(gelu_mlp, feedforward_channels=mlp_dims),
                             norm_cfg=norm_cfg, layer_scale_init_value=1.)
            for _ in range(self.num_layers))
        set_residual_scale(self.layers, residual_scale, self.embed_dims, layer_scale_init_value)
        self.drop_path_rate = drop_path_rate
        if self.cls_insert_layer is not None:
            self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        elif out_type == 'cls_token':
            self.class_attn = ClassAttentionStage(self.embed_dims, setting['num_heads'],
                                                  setting.get('num_cls_layers', 2), setting.get('mlp_ratio', 4.),
                                                  1., norm_cfg)
            set_residual_scale(self.class_attn.layers, residual_scale, self.embed_dims, layer_scale_init_value)
        self.norm = build_norm_layer(norm_cfg, self.embed_dims) if self._normalises() else nn.Identity()
        self.pool_norm = nn.Identity()
        self.with_cp = with_cp
        self._freeze_stages()

    def _check_insert_layer(self, layer: Optional[int], mask_mode: str, out_type: str) -> Optional[int]:
        """``cls_insert_layer`` as a block index in ``[0, L)``, or a clear error."""
        if layer is None:
            return None
        if not 0 <= layer < self.num_layers:
            raise BackboneConfigError(f'cls_insert_layer must be in [0, {self.num_layers}) (the SA block the class '
                                      f'token joins before), got {layer}.')
        if mask_mode != 'bidirectional':
            raise BackboneConfigError('cls_insert_layer needs mask_mode="bidirectional": under a causal mask a class '
                                      'token at the front of the sequence would see no patch.')
        if out_type == 'cls_token' and min(self.out_indices) < layer:
            raise BackboneConfigError(f'out_type="cls_token" reads the class token, which joins before block '
                                      f'{layer}: out_indices {self.out_indices} must be >= it.')
        return layer

    def init_weights(self) -> None:
        """The default init (:class:`PlainBackbone`), then ``branch_init``'s rules unless the weights are loaded."""
        first = not self.is_init
        super().init_weights()
        init_cfgs = self.init_cfg if isinstance(self.init_cfg, list) else [self.init_cfg] if self.init_cfg else []
        pretrained = any(cfg.get('type') == 'Pretrained' for cfg in init_cfgs)
        if first and not pretrained and self.branch_init != 'default':
            (fixup_init if self.branch_init == 'fixup' else t_fixup_init)(self.layers)

    def _normalises(self) -> bool:
        """Whether ``norm`` is used: on the class feature, before average pooling, or on dense features."""
        return self.out_type in ('cls_token', 'avg_featmap') or self.feature_norm == 'final'

    def _after_blocks(self) -> List[nn.Module]:
        return [*super()._after_blocks(), *([self.class_attn] if hasattr(self, 'class_attn') else [])]

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """``(B, C, H, W)`` images -> one output per ``out_indices`` entry (shapes: see ``out_type``)."""
        check_image_batch(x, self.in_channels)
        patches, grid = self.patch_embed(x)
        pos_embed = resize_pos_embed(self.pos_embed, self.patch_resolution, grid, cls_position=None)
        return self.run_layers(self.pos_drop(patches + pos_embed), TokenLayout(grid))

    def run_layers(self, tokens: Tensor, layout: TokenLayout) -> Tuple[Tensor, ...]:
        """Run the SA blocks on the ``(B, N, C)`` patch tokens and format the outputs in ``out_indices``; ``norm``
        belongs to the outputs (class feature, pooling, dense features), not to the token stream."""
        outs: List[Tensor] = []
        for i, layer in enumerate(self.layers):
            if i == self.cls_insert_layer:
                tokens = torch.cat((self.cls_token.expand(tokens.shape[0], -1, -1), tokens), dim=1)
            tokens = self._run_block(layer, tokens, layout)
            if i in self.out_indices:
                outs.append(self._format_output(tokens, layout))
        return tuple(outs)

    def _format_output(self, tokens: Tensor, layout: TokenLayout) -> Tensor:
        if self.out_type == 'cls_token':
            cls = tokens[:, 0] if self.cls_insert_layer is not None else self.class_attn(tokens)
            return self.norm(cls)
        if tokens.shape[1] > layout.num_patches:  # the inserted class token is not a patch
            tokens = tokens[:, 1:]
        return super()._format_output(self.norm(tokens), layout)
