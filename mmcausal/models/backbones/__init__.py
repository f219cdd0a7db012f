from .illama import ILLaMA

__all__ = ['ILLaMA']
