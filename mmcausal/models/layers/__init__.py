"""Building blocks used by two or more model families, one module per design axis (norm, FFN, attention, RoPE,
tokens, position, layout). A module only one family uses lives beside that family's backbone or model
(``mmcausal.models.backbones.<family>``, ``mmcausal.models.generation``); nothing here imports from
``mmcausal.models.backbones`` (``tests/test_utils/test_import_floors.py`` holds both rules)."""
from .attention import (
    MASK_MODES,
    AttentionConfigError,
    AttentionProbe,
    SelfAttention,
    check_head_split,
    explicit_attention,
    explicit_attention_mode,
    explicit_attention_requested,
    masked_attention,
    record_attention,
    soft_causal_logit_bias,
    soft_causal_weights,
    soft_mask_attention,
    split_heads,
)
from .block import TransformerBlock
from .class_attention import ClassAttention, ClassAttentionBlock, ClassAttentionStage
from .context import TokenLayout
from .ffn import FFN, SwiGLUFFN, gelu_mlp, swiglu_hidden_dims
from .grid_rope import AS2D_SCALINGS, ROPE_MODES, GridRoPE, auto_scale, check_rope_mode, grid_positions
from .norm import RMSNorm, build_norm_layer
from .patch_embed import CornerPadding, build_patch_embed
from .pos_embed import resize_pos_embed, sincos_pos_embed_2d
from .rope import RopeConfigError, apply_rotary, rope_angles_1d, rope_angles_2d, rope_frequencies, rotate_pairs
from .tokens import CLS_POSITIONS, insert_cls_token, split_cls_token, tokens_to_featmap
from .window import WindowedAttention, window_key_mask, window_partition, window_unpartition

__all__ = [
    'MASK_MODES', 'AttentionConfigError', 'AttentionProbe', 'SelfAttention', 'check_head_split', 'explicit_attention',
    'explicit_attention_mode', 'explicit_attention_requested', 'masked_attention', 'record_attention',
    'soft_causal_logit_bias', 'soft_causal_weights', 'TransformerBlock', 'TokenLayout', 'FFN', 'SwiGLUFFN',
    'swiglu_hidden_dims', 'build_norm_layer', 'resize_pos_embed', 'AS2D_SCALINGS', 'ROPE_MODES', 'GridRoPE',
    'RopeConfigError', 'apply_rotary', 'auto_scale', 'check_rope_mode', 'grid_positions', 'rope_angles_1d',
    'rope_angles_2d', 'rope_frequencies', 'CLS_POSITIONS', 'insert_cls_token', 'split_cls_token', 'tokens_to_featmap',
    'WindowedAttention', 'window_key_mask', 'window_partition', 'window_unpartition', 'ClassAttention',
    'ClassAttentionBlock', 'ClassAttentionStage', 'gelu_mlp', 'RMSNorm', 'CornerPadding', 'build_patch_embed',
    'soft_mask_attention', 'split_heads', 'rotate_pairs', 'sincos_pos_embed_2d'
]
