from .empty_detections_hook import EmptyDetectionsHook, find_score_threshold
from .soft_mask_hook import SoftMaskHook, soft_mask_rate_at

__all__ = ['EmptyDetectionsHook', 'find_score_threshold', 'SoftMaskHook', 'soft_mask_rate_at']
