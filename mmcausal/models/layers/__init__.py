"""Shared building blocks: one module per design axis (norm, FFN, attention, RoPE, tokens, position)."""
from .attention import (MASK_MODES, SelfAttention, check_mask_mode, explicit_attention, masked_attention,
                        soft_causal_logit_bias, soft_causal_weights)
from .block import TransformerBlock
from .ffn import SwiGLUFFN, swiglu_hidden_dims
from .norm import build_norm_layer
from .pos_embed import resize_pos_embed
from .rope import RotaryEmbedding1D, apply_rotary, rope_frequencies
from .tokens import CLS_POSITIONS, check_cls_position, insert_cls_token, split_cls_token

__all__ = [
    'MASK_MODES', 'SelfAttention', 'check_mask_mode', 'explicit_attention', 'masked_attention',
    'soft_causal_logit_bias', 'soft_causal_weights', 'TransformerBlock', 'SwiGLUFFN', 'swiglu_hidden_dims',
    'build_norm_layer', 'resize_pos_embed', 'RotaryEmbedding1D', 'apply_rotary', 'rope_frequencies',
    'CLS_POSITIONS', 'check_cls_position', 'insert_cls_token', 'split_cls_token'
]
