from .defocus import DefocusMamba
from .illama import ILLaMA
from .pyramid_vision_llama import PyramidVisionLLaMA
from .vision_llama import VisionLLaMA

__all__ = ['DefocusMamba', 'ILLaMA', 'PyramidVisionLLaMA', 'VisionLLaMA']
