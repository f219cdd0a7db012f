"""Training-time components: hooks (and, later, optimizer constructors)."""
from .hooks import SoftMaskHook, soft_mask_rate_at

__all__ = ['SoftMaskHook', 'soft_mask_rate_at']
