"""Training-time components: hooks and optimizer-wrapper constructors."""
from .hooks import SoftMaskHook, soft_mask_rate_at
from .optimizers import LayerDecayOptimWrapperConstructor

__all__ = ['SoftMaskHook', 'soft_mask_rate_at', 'LayerDecayOptimWrapperConstructor']
