"""Models, one package per paper family (:mod:`.illama`, :mod:`.vision_llama` plain and pyramid, :mod:`.defocus`,
:mod:`.cait`, :mod:`.generation`), what two or more of them use (:mod:`.layers`), the necks any backbone takes
(:mod:`.necks`), the distillation classifier any student takes (:mod:`.distillation`) and CLIP with any image
tower (:mod:`.clip`); all registered in MMEngine's root ``MODELS``. Every model class is importable from here, e.g.
``from mmcausal.models import VisionLLaMA``."""
from . import cait, clip, defocus, distillation, generation, illama, layers, necks, vision_llama  # noqa: F401  (registers every model)
from .cait import CaiT, TalkingHeadsAttention
from .clip import ContrastiveCLIP, ContrastiveLoss
from .defocus import (
    DecayAttention,
    DefocusClsHead,
    DefocusMamba,
    DefocusMambaMixer,
    DefocusRetNet,
    DefocusViT,
    MultiScaleRetention,
)
from .distillation import DistillationClassifier, DistillationLoss
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
from .illama import ILLaMA
from .necks import ClassAttentionPool, SimpleFeaturePyramid
from .vision_llama import MAEVisionLLaMA, PyramidVisionLLaMA, SubsampledAttention, VisionLLaMA, random_masking

__all__ = [
    'CaiT', 'DefocusMamba', 'DefocusRetNet', 'DefocusViT', 'ILLaMA', 'PyramidVisionLLaMA', 'VisionLLaMA',
    'DecayAttention', 'DefocusMambaMixer', 'MultiScaleRetention', 'SubsampledAttention', 'TalkingHeadsAttention',
    'ContrastiveCLIP', 'ContrastiveLoss', 'DefocusClsHead', 'DistillationClassifier', 'DistillationLoss',
    'ClassAttentionPool', 'SimpleFeaturePyramid', 'MAEVisionLLaMA', 'random_masking',
    'AutoencoderReconstruction', 'ClassConditionalDiffusion', 'DiffusionTransformer', 'GaussianDiffusion',
    'LinearInterpolant', 'MomentsLatents', 'PixelSpace', 'SDVAE', 'TinyAutoencoder'
]
