from .illama import ILLaMA
from .vision_llama import VisionLLaMA

__all__ = ['ILLaMA', 'VisionLLaMA']
