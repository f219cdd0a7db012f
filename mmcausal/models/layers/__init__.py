"""Shared building blocks: one module per design axis (norm, FFN, attention, RoPE, tokens, position)."""
from .attention import (
    MASK_MODES,
    SelfAttention,
    explicit_attention,
    masked_attention,
    soft_causal_logit_bias,
    soft_causal_weights,
)
from .block import TransformerBlock
from .ffn import SwiGLUFFN, swiglu_hidden_dims
from .norm import build_norm_layer
from .pos_embed import resize_pos_embed
from .rope import (
    ROPE_MODES,
    RotaryEmbedding1D,
    RotaryEmbedding2D,
    apply_rotary,
    auto_scale,
    check_rope_mode,
    grid_positions,
    rope_frequencies,
)
from .tokens import CLS_POSITIONS, insert_cls_token, split_cls_token
from .window import window_key_mask, window_partition, window_unpartition

__all__ = [
    'MASK_MODES', 'SelfAttention', 'explicit_attention', 'masked_attention',
    'soft_causal_logit_bias', 'soft_causal_weights', 'TransformerBlock', 'SwiGLUFFN', 'swiglu_hidden_dims',
    'build_norm_layer', 'resize_pos_embed', 'ROPE_MODES', 'RotaryEmbedding1D', 'RotaryEmbedding2D', 'apply_rotary',
    'auto_scale', 'check_rope_mode', 'grid_positions', 'rope_frequencies', 'window_key_mask', 'window_partition',
    'window_unpartition',
    'CLS_POSITIONS', 'insert_cls_token', 'split_cls_token'
]
