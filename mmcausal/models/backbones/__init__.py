from .cait import CaiT
from .defocus import DefocusMamba, DefocusRetNet, DefocusViT
from .illama import ILLaMA
from .pyramid_vision_llama import PyramidVisionLLaMA
from .vision_llama import VisionLLaMA

__all__ = ['CaiT', 'DefocusMamba', 'DefocusRetNet', 'DefocusViT', 'ILLaMA', 'PyramidVisionLLaMA', 'VisionLLaMA']
