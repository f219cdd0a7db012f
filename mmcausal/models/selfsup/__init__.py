from .mae import MAEVisionLLaMA, random_masking

__all__ = ['MAEVisionLLaMA', 'random_masking']
