"""A class-conditional generative model for MMEngine's runner: DiT / SiT / DiT-LLaMA / SiT-LLaMA training and
sampling from a config (VisionLLaMA Sec. 4.1).

``network`` (a :class:`~mmcausal.models.generation.DiffusionTransformer`) is trained under ``objective`` (DDPM's
:class:`~mmcausal.models.generation.GaussianDiffusion` or SiT's
:class:`~mmcausal.models.generation.LinearInterpolant`) on the latents of ``autoencoder`` (pixels, the SD-VAE, stored
VAE moments or a tiny autoencoder, :mod:`~mmcausal.models.generation.autoencoders`).
"""
import inspect
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import BaseModel
from mmpretrain.models import ClsDataPreprocessor
from mmpretrain.structures import DataSample
from torch import Tensor

from mmcausal.registry import MODELS
from mmcausal.utils.validation import ConfigValueError, check_choice
from .autoencoders import build_autoencoder
from .diffusion import GaussianDiffusion
from .guidance import check_cfg_channels

#: images in [-1, 1] (RGB) from uint8 BGR, as DiT's ``Normalize(0.5, 0.5)`` after ``ToTensor``
DEFAULT_DATA_PREPROCESSOR = dict(type=ClsDataPreprocessor, mean=[127.5] * 3, std=[127.5] * 3, to_rgb=True)
#: sampling settings: ``sampler`` / ``num_steps`` and any further keyword of the objective's ``sample``
#: (``eta``, ``method``, ...), ``cfg_scale`` (1 = no guidance), ``cfg_channels`` (None = all; 3 = the official
#: DiT / SiT rule), ``seed`` (sample ``i`` draws all its noise from ``seed + i``), ``latent_size`` (None = the
#: network's ``input_size``), ``label_rule`` (the class of sample ``i`` when ``tools/generation/sample.py`` draws
#: labels, :func:`mmcausal.apis.generation.sample_labels`: ``'random'``, uniform as the official ``sample_ddp.py``,
#: or ``'balanced'``, ``i mod num_classes``; ``predict`` samples the labels it is given)
DEFAULT_TEST_CFG = dict(sampler='ddpm', num_steps=250, cfg_scale=1., cfg_channels=None, seed=0, latent_size=None,
                        label_rule='balanced')


LABEL_RULES = ('random', 'balanced')


class PerSampleNoise:
    """Gaussian noise drawn for each sample from its own generator (CPU, seeded ``seed + sample_idx``), so a sample
    does not depend on the batch it is in, the number of processes or the device."""

    def __init__(self, seed: int, sample_indices: Sequence[int]) -> None:
        self.generators = [torch.Generator().manual_seed(int(seed) + int(index)) for index in sample_indices]

    def __call__(self, like: Tensor) -> Tensor:
        """``(B, ...)`` N(0, I) noise in ``like``'s dtype and device (B = the number of samples)."""
        noise = [torch.randn(like.shape[1:], generator=generator) for generator in self.generators]
        return torch.stack(noise).to(device=like.device, dtype=like.dtype)


@MODELS.register_module()
class ClassConditionalDiffusion(BaseModel):
    """Generator of images for class labels: ``loss`` trains the network, ``predict`` samples uint8 images.

    Args:
        network: the diffusion transformer config (its weights live under ``network.``, where
            ``tools/model_converters/dit2mmcausal.py`` writes them).
        objective: ``dict(type='GaussianDiffusion', ...)`` (DiT-LLaMA) or ``dict(type='LinearInterpolant')``
            (SiT-LLaMA).
        autoencoder: the latent space (default ``PixelSpace``; frozen); its ``latent_channels`` must be the network's
            ``in_channels``.
        data_preprocessor: default mmpretrain ``ClsDataPreprocessor`` mapping uint8 BGR images to RGB in ``[-1, 1]``.
        test_cfg: sampling settings, see ``DEFAULT_TEST_CFG``.

    Data: ``inputs`` are what the autoencoder encodes; each data sample carries ``gt_label`` (training, and the label
    to sample in ``predict``) and, for sampling, ``sample_idx`` (its seed offset).
    """

    def __init__(self, network: dict, objective: dict, autoencoder: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None, test_cfg: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor or dict(DEFAULT_DATA_PREPROCESSOR), init_cfg=init_cfg)
        self.network = MODELS.build(network)
        # fixed while the generator trains (a trainable one, the twin's, is trained before); frozen so that DDP does
        # not wait for gradients it never gets
        self.autoencoder = build_autoencoder(autoencoder).requires_grad_(False)
        with torch.device('cpu'):  # the schedule tables are host constants, also when the model is built on meta
            self.objective = MODELS.build(objective)
        self.test_cfg = dict(DEFAULT_TEST_CFG, **(test_cfg or {}))
        self._check_parts()

    def _check_parts(self) -> None:
        if self.autoencoder.latent_channels != self.network.in_channels:
            raise ConfigValueError(f'The autoencoder gives {self.autoencoder.latent_channels}-channel latents but the '
                                   f'network takes in_channels={self.network.in_channels}; make them equal.')
        if isinstance(self.objective, GaussianDiffusion) and self.objective.learn_sigma != self.network.learn_sigma:
            raise ConfigValueError(f'GaussianDiffusion(learn_sigma={self.objective.learn_sigma}) needs a network with '
                                   f'learn_sigma={self.objective.learn_sigma}; set both alike.')
        check_cfg_channels(self.test_cfg['cfg_channels'], self.network.in_channels)
        check_choice('test_cfg.label_rule', self.test_cfg['label_rule'], LABEL_RULES)
        accepted = set(inspect.signature(self.objective.sample).parameters) - {'model_fn', 'noise', 'step_noise'}
        unknown = sorted(set(self.test_cfg) - set(DEFAULT_TEST_CFG) - accepted)
        if unknown:
            raise ConfigValueError(f'test_cfg has {", ".join(unknown)}, which {type(self.objective).__name__} does not '
                                   f'sample with; its settings: {", ".join(sorted(accepted))} (and '
                                   f'{", ".join(k for k in DEFAULT_TEST_CFG if k not in accepted)}).')

    # ------------------------------------------------------------------ training
    def loss(self, inputs: Tensor, data_samples: List[DataSample]) -> Dict[str, Tensor]:
        """``loss`` (the objective's, batch mean) and its logged parts (``mse``, ``vb`` for the hybrid DDPM loss)."""
        latents = self.autoencoder.encode(inputs).detach()
        labels = self._labels(data_samples, inputs.device)
        terms = self.objective.loss(lambda x, t: self.network(x, t, labels), latents)
        losses = {'loss': terms['loss'].mean()}
        losses.update({name: value.mean().detach() for name, value in terms.items() if name != 'loss'})
        return losses

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def predict(self, inputs: Optional[Tensor], data_samples: List[DataSample]) -> List[DataSample]:
        """Samples one image per data sample, for its ``gt_label``: the data samples with ``pred_img`` (uint8
        ``(3, H, W)``, RGB) set. ``inputs`` are not used."""
        images = self.to_uint8(self.autoencoder.decode(self.sample_latents(data_samples)))
        for data_sample, image in zip(data_samples, images):
            data_sample.pred_img = image
        return data_samples

    @torch.no_grad()
    def sample_latents(self, data_samples: List[DataSample]) -> Tensor:
        """The sampled latents ``(B, C, h, w)`` for the data samples' labels with ``test_cfg``."""
        cfg = dict(self.test_cfg)
        cfg.pop('label_rule')  # how the tools choose the labels given here
        device = next(self.network.parameters()).device
        labels = self._labels(data_samples, device)
        noise = PerSampleNoise(cfg.pop('seed'), self._sample_indices(data_samples))
        scale, channels = cfg.pop('cfg_scale'), cfg.pop('cfg_channels')
        height, width = self._latent_size(cfg.pop('latent_size'))
        x_start = noise(torch.empty(len(data_samples), self.network.in_channels, height, width, device=device))
        if scale == 1.:
            model_fn = lambda x, t: self.network(x, t, labels)  # noqa: E731
        else:
            model_fn = lambda x, t: self.network.forward_with_cfg(x, t, labels, scale, cfg_channels=channels)  # noqa
        return self.objective.sample(model_fn, x_start, step_noise=noise, **cfg)

    @staticmethod
    def to_uint8(images: Tensor) -> Tensor:
        """``[-1, 1]`` -> uint8 ``clamp(127.5 x + 128, 0, 255)`` truncated (the official samplers' rounding)."""
        return (127.5 * images + 128.).clamp(0, 255).to(torch.uint8)

    def _latent_size(self, latent_size: Union[None, int, Sequence[int]]) -> Tuple[int, int]:
        if latent_size is None:
            return self.network.input_size
        size = (latent_size, latent_size) if isinstance(latent_size, int) else tuple(latent_size)
        if len(size) != 2 or any(side % self.network.patch_size for side in size):
            raise ConfigValueError(f'test_cfg.latent_size must be an int or (h, w) divisible by the patch size '
                                   f'{self.network.patch_size}, got {latent_size!r}.')
        return size

    @staticmethod
    def _labels(data_samples: List[DataSample], device: torch.device) -> Tensor:
        if any('gt_label' not in sample for sample in data_samples):
            raise ConfigValueError('Every data sample needs its class (gt_label): pack the dataset with PackInputs.')
        return torch.cat([sample.gt_label.reshape(1) for sample in data_samples]).long().to(device)

    @staticmethod
    def _sample_indices(data_samples: List[DataSample]) -> List[int]:
        if any('sample_idx' not in sample for sample in data_samples):
            raise ConfigValueError('Sampling seeds each sample by its sample_idx (its index in the dataset, set by '
                                   "mmpretrain's datasets and PackInputs): the data samples given have none.")
        return [int(sample.sample_idx) for sample in data_samples]

    # ------------------------------------------------------------------ dispatch
    def forward(self, inputs: Optional[Tensor] = None, data_samples: Optional[List[DataSample]] = None,
                mode: str = 'tensor') -> Union[Dict[str, Tensor], List[DataSample], Tensor]:
        """``'loss'``: :meth:`loss`; ``'predict'``: :meth:`predict`; ``'tensor'``: :meth:`sample_latents`."""
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'predict':
            return self.predict(inputs, data_samples)
        if mode == 'tensor':
            return self.sample_latents(data_samples)
        raise ConfigValueError(f'Invalid mode {mode!r}: use "loss", "predict" or "tensor".')


__all__ = ['ClassConditionalDiffusion', 'DEFAULT_DATA_PREPROCESSOR', 'DEFAULT_TEST_CFG', 'LABEL_RULES',
           'PerSampleNoise']
