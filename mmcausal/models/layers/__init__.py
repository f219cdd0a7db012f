"""Shared building blocks: one module per design axis (norm, FFN, attention, RoPE, tokens, position, layout)."""
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
from .decay import DecayAttention, LearnableDecay, folded_decay_attention, retnet_decay_exponents
from .ffn import FFN, SwiGLUFFN, gelu_mlp, swiglu_hidden_dims
from .grid_rope import AS2D_SCALINGS, ROPE_MODES, GridRoPE, auto_scale, check_rope_mode, grid_positions
from .learnable_rope import ROPE_PAIRINGS, LearnableRoPE, apply_unpaired_rotary, defocus_frequencies
from .norm import RMSNorm, build_norm_layer
from .pos_embed import resize_pos_embed
from .retention import MultiScaleRetention, RetentionConfigError, retention, retention_step
from .rope import RopeConfigError, apply_rotary, rope_angles_1d, rope_angles_2d, rope_frequencies, rotate_pairs
from .scan import SCAN_IMPLS, ScanConfigError, chunked_selective_scan, selective_scan, sequential_selective_scan
from .ssm import DefocusMambaMixer, group_rms_norm
from .subsample import SubsampledAttention
from .talking_heads import TALKING_HEADS_IMPLS, TalkingHeadsAttention, talking_heads_explicit, talking_heads_sdpa
from .token_order import TokenOrderError, sectioned_order
from .tokens import CLS_POSITIONS, insert_cls_token, split_cls_token, tokens_to_featmap
from .window import WindowedAttention, window_key_mask, window_partition, window_unpartition

__all__ = [
    'MASK_MODES', 'AttentionConfigError', 'AttentionProbe', 'SelfAttention', 'check_head_split', 'explicit_attention',
    'explicit_attention_mode',
    'explicit_attention_requested', 'masked_attention', 'record_attention', 'soft_causal_logit_bias',
    'soft_causal_weights', 'TransformerBlock', 'TokenLayout', 'FFN', 'SwiGLUFFN', 'swiglu_hidden_dims',
    'build_norm_layer', 'resize_pos_embed', 'AS2D_SCALINGS', 'ROPE_MODES', 'GridRoPE', 'RopeConfigError',
    'apply_rotary', 'auto_scale', 'check_rope_mode', 'grid_positions', 'rope_angles_1d', 'rope_angles_2d',
    'rope_frequencies', 'CLS_POSITIONS', 'insert_cls_token', 'split_cls_token', 'tokens_to_featmap',
    'SubsampledAttention', 'WindowedAttention', 'window_key_mask', 'window_partition', 'window_unpartition',
    'ROPE_PAIRINGS', 'LearnableRoPE', 'apply_unpaired_rotary', 'defocus_frequencies', 'SCAN_IMPLS', 'ScanConfigError',
    'chunked_selective_scan', 'selective_scan', 'sequential_selective_scan', 'DefocusMambaMixer', 'group_rms_norm',
    'TokenOrderError', 'sectioned_order', 'DecayAttention', 'LearnableDecay', 'folded_decay_attention',
    'retnet_decay_exponents', 'MultiScaleRetention', 'RetentionConfigError', 'retention', 'retention_step',
    'ClassAttention', 'ClassAttentionBlock', 'ClassAttentionStage', 'gelu_mlp', 'TALKING_HEADS_IMPLS',
    'TalkingHeadsAttention', 'talking_heads_explicit', 'talking_heads_sdpa', 'RMSNorm', 'soft_mask_attention',
    'split_heads', 'rotate_pairs'
]
