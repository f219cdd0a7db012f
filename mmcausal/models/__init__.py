"""Models: shared layers, backbones, heads, necks and the generation networks (all registered in MMEngine's
root ``MODELS``)."""
from . import backbones, generation, heads, layers, necks, selfsup  # noqa: F401
from .generation import DiffusionTransformer

__all__ = ['DiffusionTransformer']
