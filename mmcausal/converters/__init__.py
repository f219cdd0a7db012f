"""Official-checkpoint converters; the CLIs are in ``tools/model_converters/``."""
from .common import load_source_state_dict, save_checkpoint
from .illama import convert_illama

__all__ = ['load_source_state_dict', 'save_checkpoint', 'convert_illama']
