"""The spaces a class-conditional generative model diffuses in, behind one interface.

An autoencoder has ``latent_channels`` and ``downsample`` (image side / latent side), ``encode(inputs)`` -> latents
``(B, latent_channels, H / downsample, W / downsample)`` and ``decode(latents)`` -> images ``(B, 3, H, W)`` in
``[-1, 1]`` (not clamped). ``inputs`` is what the data carries: images in ``[-1, 1]`` for every autoencoder but
:class:`MomentsLatents`, whose data are the posterior moments stored by ``tools/generation/extract_latents.py``.

* :class:`PixelSpace`: the identity (pixel-space diffusion);
* :class:`SDVAE`: Stable Diffusion's VAE (``sd-vae-ft-ema`` / ``-mse``) through diffusers' ``AutoencoderKL`` from a
  local folder, loaded on first use (building a model needs neither diffusers nor the files), latents scaled by
  0.18215 as DiT / SiT train;
* :class:`MomentsLatents`: the VAE's posterior mean and log-variance stored once per image and flip; a latent is
  sampled from them at every encode, as the official code samples ``latent_dist`` every step; decodes with a VAE;
* :class:`TinyAutoencoder`: a small trainable convolutional autoencoder (the CPU twin's stand-in for the VAE).
"""
import importlib
from pathlib import Path
from typing import Optional, Sequence, Union

import torch
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.checkpoint_loading import load_checkpoint_file
from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import ConfigValueError, check_choice
from .transport import MissingOptionalDependency

SD_VAE_SCALE = 0.18215  # the latent scale of Stable Diffusion's VAE that DiT / SiT multiply the latents by
ENCODE_MODES = ('sample', 'mean')


class LatentAutoencoder(nn.Module):
    """The interface (module doc): ``latent_channels``, ``downsample``, ``encode``, ``decode``."""
    latent_channels: int
    downsample: int

    def encode(self, inputs: Tensor) -> Tensor:
        raise NotImplementedError

    def decode(self, latents: Tensor) -> Tensor:
        raise NotImplementedError


@MODELS.register_module()
class PixelSpace(LatentAutoencoder):
    """Diffusion on the images themselves: ``encode`` and ``decode`` are the identity."""

    def __init__(self, channels: int = 3) -> None:
        super().__init__()
        self.latent_channels, self.downsample = channels, 1

    def encode(self, inputs: Tensor) -> Tensor:
        return inputs

    def decode(self, latents: Tensor) -> Tensor:
        return latents


def sample_posterior(moments: Tensor, mode: str = 'sample') -> Tensor:
    """A latent ``(B, C, h, w)`` of the diagonal Gaussian whose ``mean | logvar`` are ``moments`` ``(B, 2C, h, w)``:
    ``mean + exp(logvar / 2) * N(0, I)`` (``'sample'``) or the mean; logvar clamped to ``[-30, 20]`` as the VAE's
    posterior does."""
    check_choice('encode mode', mode, ENCODE_MODES)
    mean, logvar = moments.float().chunk(2, dim=1)
    if mode == 'mean':
        return mean
    return mean + torch.exp(0.5 * logvar.clamp(-30., 20.)) * torch.randn_like(mean)


@MODELS.register_module()
class SDVAE(LatentAutoencoder):
    """Stable Diffusion's KL autoencoder (DiT / SiT: ``stabilityai/sd-vae-ft-ema``) from a local diffusers folder.

    Args:
        pretrained: the folder ``AutoencoderKL.from_pretrained`` reads (``config.json`` + weights); nothing is
            downloaded. Read on the first ``encode`` / ``decode``; the VAE is frozen, kept out of the model's
            ``state_dict`` (checkpoints and the EMA hold the generator only) and follows the inputs' device.
        scale: latents are ``scale * z`` (0.18215).
        encode_mode: ``'sample'`` (a posterior sample, as the official training) or ``'mean'``.
        latent_channels, downsample: of the VAE (4, 8 for SD's).
    """

    def __init__(self, pretrained: str, scale: float = SD_VAE_SCALE, encode_mode: str = 'sample',
                 latent_channels: int = 4, downsample: int = 8) -> None:
        super().__init__()
        self.pretrained = str(pretrained)
        self.scale = scale
        self.encode_mode = check_choice('SDVAE encode_mode', encode_mode, ENCODE_MODES)
        self.latent_channels, self.downsample = latent_channels, downsample
        self.__dict__['_vae'] = None  # not a submodule: see the class doc

    @property
    def vae(self) -> nn.Module:
        """diffusers' ``AutoencoderKL``, loaded on first access."""
        if self._vae is None:
            self.__dict__['_vae'] = self._load()
        return self._vae

    def _load(self) -> nn.Module:
        folder = Path(self.pretrained).expanduser()
        if not (folder / 'config.json').is_file():
            raise UserInputError(f'No diffusers VAE folder at {self.pretrained!r} (it needs config.json and the '
                                 "weights): copy stabilityai/sd-vae-ft-ema there or point the config's SDVAE at its "
                                 'folder (model.autoencoder.decoder.pretrained with stored moments).')
        try:
            diffusers = importlib.import_module('diffusers')
        except ImportError as error:
            raise MissingOptionalDependency('The SD-VAE needs diffusers: pip install -r requirements/optional.txt '
                                            '(or pre-extract latents and decode elsewhere).') from error
        vae = diffusers.AutoencoderKL.from_pretrained(str(folder), local_files_only=True)
        return vae.eval().requires_grad_(False)

    def _on(self, device: torch.device) -> nn.Module:
        vae = self.vae
        if next(vae.parameters()).device != device:
            self.__dict__['_vae'] = vae = vae.to(device)
        return vae

    @torch.no_grad()
    def encode_moments(self, images: Tensor) -> Tensor:
        """The posterior ``mean | logvar`` ``(B, 2C, H/8, W/8)`` (fp32) of images ``(B, 3, H, W)`` in ``[-1, 1]``."""
        return self._on(images.device).encode(images.float()).latent_dist.parameters.float()

    @torch.no_grad()
    def encode(self, inputs: Tensor) -> Tensor:
        return self.scale * sample_posterior(self.encode_moments(inputs), self.encode_mode)

    @torch.no_grad()
    def decode(self, latents: Tensor) -> Tensor:
        return self._on(latents.device).decode(latents.float() / self.scale).sample


@MODELS.register_module()
class MomentsLatents(LatentAutoencoder):
    """Latents sampled from stored posterior moments (the data's ``(B, 2C, h, w)`` ``mean | logvar``), times
    ``scale``; ``decode`` goes through ``decoder`` (an autoencoder config, e.g. :class:`SDVAE`, built lazily-loading as
    that one is), whose ``scale`` the latents share.

    Args:
        decoder: the autoencoder that produced the moments and decodes the samples.
        encode_mode: ``'sample'`` (a new posterior sample at every call, as the official training) or ``'mean'``.
    """

    def __init__(self, decoder: dict, encode_mode: str = 'sample') -> None:
        super().__init__()
        self.decoder = MODELS.build(decoder)
        if not hasattr(self.decoder, 'scale'):
            raise ConfigValueError(f'MomentsLatents needs a decoder with a latent scale (e.g. SDVAE), got '
                                   f'{type(self.decoder).__name__}.')
        self.scale = self.decoder.scale
        self.encode_mode = check_choice('MomentsLatents encode_mode', encode_mode, ENCODE_MODES)
        self.latent_channels, self.downsample = self.decoder.latent_channels, self.decoder.downsample

    def encode(self, inputs: Tensor) -> Tensor:
        if inputs.shape[1] != 2 * self.latent_channels:
            raise ConfigValueError(f'MomentsLatents expects the posterior mean and log-variance '
                                   f'({2 * self.latent_channels} channels), got {inputs.shape[1]}: train on the output '
                                   'of tools/generation/extract_latents.py (LatentMomentsDataset).')
        return self.scale * sample_posterior(inputs, self.encode_mode)

    def decode(self, latents: Tensor) -> Tensor:
        return self.decoder.decode(latents)


@MODELS.register_module()
class TinyAutoencoder(LatentAutoencoder):
    """A small deterministic convolutional autoencoder (the CPU twin's VAE, ``configs/dit_llama/README.md``).

    Encoder: 3x3 convs ``3 -> channels[0] -> ... -> channels[-1] -> latent_channels`` with SiLU, every conv after
    the first of stride 2 (``downsample = 2 ** (len(channels) - 1)``); the decoder mirrors it with nearest 2x
    up-sampling. Latents are ``scale * encoder(x)``; ``scale`` is a buffer (saved with the weights), set by
    :meth:`calibrate_scale` to 1 / std of the training latents (the twin's 0.18215).

    Args:
        channels: encoder widths, e.g. ``(24, 48, 48)`` (f = 4, about 67k parameters).
        latent_channels: C of the latents.
        checkpoint: a checkpoint of :class:`~mmcausal.models.generation.AutoencoderReconstruction` (its
            ``autoencoder.*`` weights and scale) that :meth:`init_weights` loads: a generator trains on the latents of
            an autoencoder trained before. Read only by ``init_weights`` (the runner's at the start of training), so
            building the model or loading a generator checkpoint (``sample.py``, ``test.py``), which holds these
            weights, does not need the file; training does, a ``--resume`` too (the runner initialises first).
    """

    def __init__(self, channels: Sequence[int] = (24, 48, 48), latent_channels: int = 4,
                 checkpoint: Optional[str] = None) -> None:
        super().__init__()
        self.checkpoint = checkpoint
        if not channels:
            raise ConfigValueError('TinyAutoencoder needs at least one encoder width in channels.')
        self.latent_channels, self.downsample = latent_channels, 2 ** (len(channels) - 1)
        widths = [3, *channels]
        encoder = []
        for index, (cin, cout) in enumerate(zip(widths[:-1], widths[1:])):
            encoder += [nn.Conv2d(cin, cout, 3, stride=1 if index == 0 else 2, padding=1), nn.SiLU()]
        self.encoder = nn.Sequential(*encoder, nn.Conv2d(widths[-1], latent_channels, 3, padding=1))
        reversed_widths = widths[::-1]  # channels[-1], ..., channels[0], 3
        decoder = [nn.Conv2d(latent_channels, reversed_widths[0], 3, padding=1), nn.SiLU()]
        for index, (cin, cout) in enumerate(zip(reversed_widths[:-2], reversed_widths[1:-1])):
            decoder += [nn.Upsample(scale_factor=2, mode='nearest'), nn.Conv2d(cin, cout, 3, padding=1), nn.SiLU()]
        self.decoder = nn.Sequential(*decoder, nn.Conv2d(reversed_widths[-2], 3, 3, padding=1))
        self.register_buffer('scale', torch.ones(()))

    def encode(self, inputs: Tensor) -> Tensor:
        return self.scale * self.encoder(inputs)

    def decode(self, latents: Tensor) -> Tensor:
        return self.decoder(latents / self.scale)

    def forward(self, images: Tensor) -> Tensor:
        """The reconstruction ``(B, 3, H, W)`` of ``images`` (``H, W`` divisible by ``downsample``)."""
        return self.decode(self.encode(images))

    def init_weights(self) -> None:
        """Load the trained weights and scale from ``checkpoint`` (nothing without one)."""
        if self.checkpoint is None:
            return
        if not Path(self.checkpoint).is_file():
            raise UserInputError(f'The tiny autoencoder checkpoint {self.checkpoint} does not exist: train the '
                                 'autoencoder config first (configs/dit_llama/tiny-ae-nano-f4_*_shapes-32px.py) or set '
                                 'model.autoencoder.checkpoint to its checkpoint.')
        state_dict = load_checkpoint_file(self.checkpoint, map_location='cpu')
        state_dict = state_dict.get('state_dict', state_dict)
        prefix = 'autoencoder.'
        weights = {key[len(prefix):]: value for key, value in state_dict.items() if key.startswith(prefix)}
        if {key: value.shape for key, value in weights.items()} != {key: value.shape
                                                                   for key, value in self.state_dict().items()}:
            raise UserInputError(f'{self.checkpoint} holds no autoencoder of this shape: give the checkpoint of an '
                                 f'AutoencoderReconstruction run ({prefix}* weights) with the same channels.')
        self.load_state_dict(weights)

    @torch.no_grad()
    def calibrate_scale(self, images: Union[Tensor, Sequence[Tensor]]) -> float:
        """Set ``scale`` to 1 / std of the unscaled latents of ``images`` (a batch or batches); returns it."""
        batches = [images] if isinstance(images, Tensor) else list(images)
        latents = torch.cat([self.encoder(batch).flatten() for batch in batches])
        self.scale.fill_(1. / latents.std().item())
        return self.scale.item()


def build_autoencoder(cfg: Optional[Union[dict, LatentAutoencoder]]) -> LatentAutoencoder:
    """An autoencoder from its config (None: :class:`PixelSpace`), checked to have the interface."""
    autoencoder = PixelSpace() if cfg is None else cfg if isinstance(cfg, nn.Module) else MODELS.build(cfg)
    missing = [name for name in ('latent_channels', 'downsample', 'encode', 'decode') if not hasattr(autoencoder, name)]
    if missing:
        raise ConfigValueError(f'{type(autoencoder).__name__} is not an autoencoder (it lacks {", ".join(missing)}); '
                               'use PixelSpace, SDVAE, MomentsLatents or TinyAutoencoder.')
    return autoencoder


__all__ = ['LatentAutoencoder', 'MomentsLatents', 'PixelSpace', 'SDVAE', 'SD_VAE_SCALE', 'TinyAutoencoder',
           'build_autoencoder', 'sample_posterior']
