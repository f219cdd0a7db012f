"""CaiT (Touvron et al. 2021, "Going deeper with Image Transformers"): the backbone with its class-attention stage
(:mod:`.backbone`), the talking-heads attention of its self-attention blocks (:mod:`.talking_heads`) and that
attention's fused training path (:mod:`.fused_talking_heads`)."""
from .backbone import FEATURE_NORMS, CaiT, ClassAttention, ClassAttentionBlock, ClassAttentionStage
from .fused_talking_heads import talking_heads_fused
from .talking_heads import TALKING_HEADS_IMPLS, TalkingHeadsAttention, talking_heads_explicit, talking_heads_sdpa

__all__ = [
    'CaiT', 'FEATURE_NORMS', 'ClassAttention', 'ClassAttentionBlock', 'ClassAttentionStage', 'TALKING_HEADS_IMPLS',
    'TalkingHeadsAttention', 'talking_heads_explicit', 'talking_heads_fused', 'talking_heads_sdpa'
]
