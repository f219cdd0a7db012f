"""Pyramid VisionLLaMA: the backbone (:mod:`.backbone`) and the sub-sampled global attention (GSA) only its stages
use (:mod:`.subsample`)."""
from .backbone import PyramidVisionLLaMA
from .subsample import SubsampledAttention

__all__ = ['PyramidVisionLLaMA', 'SubsampledAttention']
