"""What two or more model families use, one module per job:

* :mod:`.position`: where tokens sit (:class:`TokenLayout`, the class-token slot) and RoPE (angle tables, the
  rotation, the :class:`GridRoPE` policy);
* :mod:`.attention`: multi-head self-attention with the causal-ViT mask modes, through SDPA;
* :mod:`.block`: the pre-norm residual block (RMSNorm, SwiGLU / GELU MLP, drop path) and the stack of blocks;
* :mod:`.backbone`: the plain backbone base (stem, outputs, freezing, layer ids for lr decay);
* :mod:`.mask_mode`: a backbone's attention mask mode, validated once and recorded in its state dict;
* :mod:`.probes`: reading attention weights for analysis;
* :mod:`.fast_paths`: the CPU autograd functions that compute what :mod:`.block` and :mod:`.attention` define.

A module only one family uses lives in that family's package (``mmcausal.models.<family>``); nothing here imports
a family (``tests/test_utils/test_import_floors.py`` holds both rules)."""
from .attention import (
    MASK_MODES,
    AttentionConfigError,
    SelfAttention,
    check_head_split,
    explicit_attention,
    masked_attention,
    merge_bias,
    soft_causal_logit_bias,
    soft_causal_weights,
    soft_mask_attention,
    split_heads,
)
from .backbone import (
    CLS_POSITIONS,
    OUT_TYPES,
    PlainBackbone,
    insert_cls_token,
    resize_pos_embed,
    resolve_arch,
    sincos_pos_embed_2d,
    split_cls_token,
)
from .block import (
    BackboneConfigError,
    BlockStackMixin,
    CornerPadding,
    DropPath,
    ImageBatchError,
    RMSNorm,
    SwiGLUFFN,
    TransformerBlock,
    build_norm_layer,
    build_patch_embed,
    check_image_batch,
    gelu_mlp,
    linear_drop_path_rates,
    swiglu_hidden_dims,
)
from .mask_mode import MaskedAttentionMixin, MaskModeMixin
from .position import (
    AS2D_SCALINGS,
    ROPE_MODES,
    GridRoPE,
    RopeConfigError,
    TokenLayout,
    apply_rotary,
    auto_scale,
    check_rope_mode,
    grid_positions,
    rope_angles_1d,
    rope_angles_2d,
    rope_frequencies,
    rotate_pairs,
    tokens_to_featmap,
)
from .probes import EXPLICIT_ATTENTION, AttentionProbe, explicit_attention_mode, record_attention

__all__ = [
    'MASK_MODES', 'AttentionConfigError', 'SelfAttention', 'check_head_split', 'explicit_attention',
    'masked_attention', 'merge_bias', 'soft_causal_logit_bias', 'soft_causal_weights', 'soft_mask_attention',
    'split_heads', 'OUT_TYPES', 'CornerPadding', 'PlainBackbone', 'build_patch_embed', 'resize_pos_embed',
    'resolve_arch', 'sincos_pos_embed_2d', 'BackboneConfigError', 'BlockStackMixin', 'DropPath', 'ImageBatchError',
    'RMSNorm', 'SwiGLUFFN', 'TransformerBlock', 'build_norm_layer', 'check_image_batch', 'gelu_mlp',
    'linear_drop_path_rates', 'swiglu_hidden_dims', 'MaskedAttentionMixin', 'MaskModeMixin', 'AS2D_SCALINGS',
    'CLS_POSITIONS', 'ROPE_MODES', 'GridRoPE', 'RopeConfigError', 'TokenLayout', 'apply_rotary', 'auto_scale',
    'check_rope_mode', 'grid_positions', 'insert_cls_token', 'rope_angles_1d', 'rope_angles_2d', 'rope_frequencies',
    'rotate_pairs', 'split_cls_token', 'tokens_to_featmap', 'EXPLICIT_ATTENTION', 'AttentionProbe',
    'explicit_attention_mode', 'record_attention'
]
