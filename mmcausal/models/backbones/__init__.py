"""Backbones. A family whose modules no other family uses keeps them beside its backbone, in its own package
(``defocus/``, ``cait/``, ``pyramid_vision_llama/``); what two or more families use is in ``mmcausal.models.layers``."""
from .cait import CaiT, TalkingHeadsAttention
from .defocus import DecayAttention, DefocusMamba, DefocusMambaMixer, DefocusRetNet, DefocusViT, MultiScaleRetention
from .illama import ILLaMA
from .pyramid_vision_llama import PyramidVisionLLaMA, SubsampledAttention
from .vision_llama import VisionLLaMA

__all__ = [
    'CaiT', 'DefocusMamba', 'DefocusRetNet', 'DefocusViT', 'ILLaMA', 'PyramidVisionLLaMA', 'VisionLLaMA',
    'DecayAttention', 'DefocusMambaMixer', 'MultiScaleRetention', 'SubsampledAttention', 'TalkingHeadsAttention'
]
