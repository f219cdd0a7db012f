"""Training-time components: hooks, optimizer-wrapper constructors, train loops and the FSDP wrap policy."""
from .hooks import (
    DropPathScheduleHook,
    SampleGridHook,
    ShardedEMAHook,
    SoftMaskHook,
    drop_path_rate_at,
    soft_mask_rate_at,
)
from .optimizers import LayerDecayOptimWrapperConstructor
from .runner import ExactResumeEpochBasedTrainLoop, ExactResumeIterBasedTrainLoop
from .sharding import block_wrap_policy

__all__ = [
    'DropPathScheduleHook', 'drop_path_rate_at', 'SampleGridHook', 'ShardedEMAHook', 'SoftMaskHook',
    'soft_mask_rate_at', 'LayerDecayOptimWrapperConstructor', 'ExactResumeEpochBasedTrainLoop',
    'ExactResumeIterBasedTrainLoop', 'block_wrap_policy'
]
