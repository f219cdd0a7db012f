"""Training-time components: hooks, optimizer-wrapper constructors and train loops."""
from .hooks import DropPathScheduleHook, SoftMaskHook, drop_path_rate_at, soft_mask_rate_at
from .optimizers import LayerDecayOptimWrapperConstructor
from .runner import ExactResumeEpochBasedTrainLoop, ExactResumeIterBasedTrainLoop

__all__ = [
    'DropPathScheduleHook', 'drop_path_rate_at', 'SoftMaskHook', 'soft_mask_rate_at',
    'LayerDecayOptimWrapperConstructor', 'ExactResumeEpochBasedTrainLoop', 'ExactResumeIterBasedTrainLoop'
]
