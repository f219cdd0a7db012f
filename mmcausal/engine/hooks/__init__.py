from .dataset_epoch_hook import DatasetEpochHook
from .drop_path_schedule_hook import DropPathScheduleHook, drop_path_rate_at
from .empty_detections_hook import EmptyDetectionsHook, find_score_threshold
from .sample_grid_hook import SampleGridHook
from .sharded_ema_hook import ShardedEMAHook
from .soft_mask_hook import SoftMaskHook, soft_mask_rate_at

__all__ = [
    'DatasetEpochHook', 'DropPathScheduleHook', 'drop_path_rate_at', 'EmptyDetectionsHook', 'find_score_threshold',
    'SoftMaskHook', 'soft_mask_rate_at', 'ShardedEMAHook', 'SampleGridHook'
]
