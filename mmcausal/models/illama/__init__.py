"""iLLaMA (Wang et al. 2024, "Adapting LLaMA Decoder to Vision Transformer"): the backbone; every part it
composes is shared (:mod:`mmcausal.models.layers`)."""
from .backbone import ILLaMA
from .quantization import Int8Linear, QATLinear, convert_to_int8, quantize_blocks

__all__ = ['ILLaMA', 'Int8Linear', 'QATLinear', 'convert_to_int8', 'quantize_blocks']
