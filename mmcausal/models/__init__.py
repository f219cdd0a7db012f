"""Models: shared layers, backbones, heads and necks (all registered in MMEngine's root ``MODELS``)."""
from . import backbones, heads, layers, necks, selfsup  # noqa: F401
