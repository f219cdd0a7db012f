"""Models: shared layers, backbones and necks (all registered in MMEngine's root ``MODELS``)."""
from . import backbones, layers, necks, selfsup  # noqa: F401
