"""Training a small autoencoder through MMEngine's runner (the first stage of the CPU generation twins,
``configs/dit_llama/README.md``): pixel MSE of the reconstruction, and the latent scale (1 / std of the training
latents, the twin's 0.18215) tracked as it trains, so that the checkpoint holds everything a generator's
``TinyAutoencoder(checkpoint=...)`` needs."""
from typing import Dict, List, Optional, Union

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from mmpretrain.structures import DataSample
from torch import Tensor

from mmcausal.registry import MODELS
from mmcausal.utils.validation import ConfigValueError
from .autoencoders import build_autoencoder
from .class_conditional import DEFAULT_DATA_PREPROCESSOR


@MODELS.register_module()
class AutoencoderReconstruction(BaseModel):
    """Trains ``autoencoder`` (e.g. ``TinyAutoencoder``) to reconstruct its images; its weights live under
    ``autoencoder.``, where ``TinyAutoencoder.init_weights`` reads them.

    The scale: every training step updates ``running_var``, a running estimate (``scale_momentum``, as BatchNorm's)
    of the variance of the unscaled latents of the batch, and sets the autoencoder's ``scale`` to
    ``1 / sqrt(running_var)``; the decoder divides the scale out, so the loss does not depend on it.

    Args:
        autoencoder: the autoencoder config (an ``encode`` / ``decode`` pair with a ``scale`` buffer).
        scale_momentum: the weight of the newest batch in ``running_var``.
        data_preprocessor: default mmpretrain ``ClsDataPreprocessor`` mapping uint8 BGR images to RGB in ``[-1, 1]``.
    """

    def __init__(self, autoencoder: dict, scale_momentum: float = 0.1, data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor or dict(DEFAULT_DATA_PREPROCESSOR), init_cfg=init_cfg)
        self.autoencoder = build_autoencoder(autoencoder)
        if not isinstance(getattr(self.autoencoder, 'scale', None), Tensor):
            raise ConfigValueError(f'AutoencoderReconstruction trains an autoencoder with a scale buffer (e.g. '
                                   f'TinyAutoencoder), got {type(self.autoencoder).__name__}.')
        if not 0. < scale_momentum <= 1.:
            raise ConfigValueError(f'scale_momentum must be in (0, 1], got {scale_momentum}.')
        self.scale_momentum = scale_momentum
        self.register_buffer('running_var', torch.ones(()))

    def loss(self, inputs: Tensor, data_samples: Optional[List[DataSample]] = None) -> Dict[str, Tensor]:
        """``loss``: the pixel MSE of the reconstructions of ``inputs`` ``(B, 3, H, W)`` in ``[-1, 1]``."""
        latents = self.autoencoder.encode(inputs)
        reconstructions = self.autoencoder.decode(latents)  # with the scale it encoded with, before it moves
        if self.training:
            self._track_scale(latents.detach() / self.autoencoder.scale)
        return dict(loss=F.mse_loss(reconstructions, inputs), scale=self.autoencoder.scale.clone())

    @torch.no_grad()
    def _track_scale(self, unscaled: Tensor) -> None:
        self.running_var.lerp_(unscaled.float().var(), self.scale_momentum)
        # a new tensor, not an in-place copy: this step's graph holds the scale it encoded and decoded with
        self.autoencoder.scale = self.running_var.rsqrt()

    def forward(self, inputs: Tensor, data_samples: Optional[List[DataSample]] = None,
                mode: str = 'tensor') -> Union[Dict[str, Tensor], Tensor]:
        """``'loss'``: :meth:`loss`; ``'tensor'``: the reconstructions ``(B, 3, H, W)``."""
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'tensor':
            return self.autoencoder.decode(self.autoencoder.encode(inputs))
        raise ConfigValueError(f'Invalid mode {mode!r}: use "loss" or "tensor" (the autoencoder samples nothing).')


__all__ = ['AutoencoderReconstruction']
