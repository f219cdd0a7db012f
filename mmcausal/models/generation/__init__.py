"""Class-conditional image generation (VisionLLaMA Sec. 4.1): the diffusion transformer of DiT / SiT / DiT-LLaMA /
SiT-LLaMA and classifier-free guidance; the objectives and samplers are in ``diffusion`` (DDPM) and ``transport``
(SiT's interpolant); the latent spaces in ``autoencoders``; the trainable model in ``class_conditional``."""
from .autoencoder_training import AutoencoderReconstruction
from .autoencoders import SDVAE, MomentsLatents, PixelSpace, TinyAutoencoder, build_autoencoder
from .class_conditional import ClassConditionalDiffusion
from .diffusion import GaussianDiffusion
from .diffusion_transformer import DiffusionTransformer, GenerationInputError
from .guidance import check_cfg_channels, classifier_free_guidance
from .transport import LinearInterpolant

__all__ = ['AutoencoderReconstruction', 'ClassConditionalDiffusion', 'DiffusionTransformer', 'GaussianDiffusion',
           'LinearInterpolant', 'GenerationInputError', 'MomentsLatents', 'PixelSpace', 'SDVAE', 'TinyAutoencoder',
           'build_autoencoder', 'check_cfg_channels', 'classifier_free_guidance']
