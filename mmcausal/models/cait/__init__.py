"""CaiT (Touvron et al. 2021, "Going deeper with Image Transformers"): the backbone with its class-attention stage
(:mod:`.backbone`), the talking-heads attention of its self-attention blocks (:mod:`.talking_heads`), that
attention's fused training path (:mod:`.fused_talking_heads`) and the residual-branch weightings of the paper's
Table 1 (:mod:`.residual_scaling`)."""
from .backbone import (
    ATTN_TYPES,
    DROP_PATH_SCHEDULES,
    FEATURE_NORMS,
    CaiT,
    ClassAttention,
    ClassAttentionBlock,
    ClassAttentionStage,
)
from .fused_talking_heads import talking_heads_fused
from .residual_scaling import BRANCH_INITS, RESIDUAL_SCALES, ScalarScale
from .talking_heads import TALKING_HEADS_IMPLS, TalkingHeadsAttention, talking_heads_explicit, talking_heads_sdpa

__all__ = [
    'CaiT', 'FEATURE_NORMS', 'ATTN_TYPES', 'DROP_PATH_SCHEDULES', 'BRANCH_INITS', 'RESIDUAL_SCALES', 'ScalarScale',
    'ClassAttention', 'ClassAttentionBlock', 'ClassAttentionStage', 'TALKING_HEADS_IMPLS', 'TalkingHeadsAttention',
    'talking_heads_explicit', 'talking_heads_fused', 'talking_heads_sdpa'
]
