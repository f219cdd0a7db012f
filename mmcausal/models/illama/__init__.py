"""iLLaMA (Wang et al. 2024, "Adapting LLaMA Decoder to Vision Transformer"): the backbone; every part it
composes is shared (:mod:`mmcausal.models.layers`)."""
from .backbone import ILLaMA

__all__ = ['ILLaMA']
