from .soft_mask_hook import SoftMaskHook, soft_mask_rate_at

__all__ = ['SoftMaskHook', 'soft_mask_rate_at']
