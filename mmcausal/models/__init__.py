"""Models: shared layers, backbones, heads, necks, self-supervised models and the generation networks (all
registered in MMEngine's root ``MODELS``). Every model class is importable from here, e.g.
``from mmcausal.models import VisionLLaMA``."""
from . import backbones, generation, heads, layers, necks, selfsup  # noqa: F401  (layers: imported to register them)
from .backbones import *  # noqa: F401,F403
from .generation import (
    SDVAE,
    AutoencoderReconstruction,
    ClassConditionalDiffusion,
    DiffusionTransformer,
    GaussianDiffusion,
    LinearInterpolant,
    MomentsLatents,
    PixelSpace,
    TinyAutoencoder,
)
from .heads import *  # noqa: F401,F403
from .necks import *  # noqa: F401,F403
from .selfsup import *  # noqa: F401,F403

__all__ = [
    *backbones.__all__, *heads.__all__, *necks.__all__, *selfsup.__all__, 'AutoencoderReconstruction',
    'ClassConditionalDiffusion', 'DiffusionTransformer', 'GaussianDiffusion', 'LinearInterpolant', 'MomentsLatents',
    'PixelSpace', 'SDVAE', 'TinyAutoencoder'
]
