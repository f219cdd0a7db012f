"""Training-time components: hooks, optimizer-wrapper constructors and train loops."""
from .hooks import SoftMaskHook, soft_mask_rate_at
from .optimizers import LayerDecayOptimWrapperConstructor
from .runner import ExactResumeEpochBasedTrainLoop, ExactResumeIterBasedTrainLoop

__all__ = [
    'SoftMaskHook', 'soft_mask_rate_at', 'LayerDecayOptimWrapperConstructor', 'ExactResumeEpochBasedTrainLoop',
    'ExactResumeIterBasedTrainLoop'
]
