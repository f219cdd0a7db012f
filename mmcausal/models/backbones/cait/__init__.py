"""CaiT: the backbone (:mod:`.backbone`) and the talking-heads attention only its self-attention blocks use
(:mod:`.talking_heads`). Its class-attention stage is shared (``mmcausal.models.layers.class_attention``)."""
from .backbone import FEATURE_NORMS, CaiT
from .talking_heads import (
    TALKING_HEADS_IMPLS,
    TalkingHeadsAttention,
    talking_heads_explicit,
    talking_heads_fused,
    talking_heads_sdpa,
)

__all__ = [
    'CaiT', 'FEATURE_NORMS', 'TALKING_HEADS_IMPLS', 'TalkingHeadsAttention', 'talking_heads_explicit',
    'talking_heads_fused', 'talking_heads_sdpa'
]
