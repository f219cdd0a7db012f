"""The attention mask mode of a backbone (:data:`~.attention.MASK_MODES`), validated once where it is set and
recorded in the state dict, and the soft-mask rate its blocks share (iLLaMA Eq. 2)."""
import warnings
from typing import Dict, Tuple

import torch
from torch import Tensor

from mmcausal.utils.validation import ConfigValueError, check_choice
from .attention import MASK_MODES
from .block import BackboneConfigError

MASK_MODE_KEY = 'mask_mode'  # state-dict entry (under the backbone's prefix) recording the attention mask mode


def encode_mask_mode(mask_mode: str) -> Tensor:
    """The state-dict record of a mask mode: its name as a ``uint8`` tensor of ASCII codes (a tensor, so
    every checkpoint path keeps it, renames it with the weights and loads it with ``weights_only=True``)."""
    return torch.tensor(list(mask_mode.encode('ascii')), dtype=torch.uint8)


def decode_mask_mode(record: Tensor) -> str:
    """Inverse of :func:`encode_mask_mode`."""
    return bytes(record.flatten().tolist()).decode('ascii')


class MaskModeMixin:
    """Backbones that take an attention ``mask_mode`` (:data:`~mmcausal.models.layers.MASK_MODES`). Each declares
    the modes it cannot honour and why in ``refused_mask_modes``; :meth:`_set_mask_mode` checks the argument
    against both (one line naming what to change) and records it as ``mask_mode``.

    A backbone that honours more than one mode writes its mode into its state dict (``<prefix>mask_mode``) and
    warns when it loads weights trained in another mode: the keys are the same, the attention is not."""
    #: mode -> why this backbone cannot honour it (a clause that ends the error message: say what to use instead)
    refused_mask_modes: Dict[str, str] = {}
    mask_mode: str

    @classmethod
    def accepted_mask_modes(cls) -> Tuple[str, ...]:
        """The modes of :data:`~mmcausal.models.layers.MASK_MODES` this backbone honours."""
        return tuple(mode for mode in MASK_MODES if mode not in cls.refused_mask_modes)

    def _set_mask_mode(self, mask_mode: str) -> None:
        """Validate ``mask_mode`` (:class:`BackboneConfigError` for an unknown or refused mode) and record it."""
        name = type(self).__name__
        check_choice(f'{name} mask_mode', mask_mode, MASK_MODES, BackboneConfigError)
        if mask_mode in self.refused_mask_modes:
            raise BackboneConfigError(f'{name} cannot honour mask_mode={mask_mode!r} (it takes '
                                      f'{list(self.accepted_mask_modes())}): {self.refused_mask_modes[mask_mode]}')
        self.mask_mode = mask_mode
        if len(self.accepted_mask_modes()) > 1:
            self._register_state_dict_hook(MaskModeMixin._record_mask_mode)
            self._register_load_state_dict_pre_hook(self._check_loaded_mask_mode)

    @staticmethod
    def _record_mask_mode(module: 'MaskModeMixin', state_dict: dict, prefix: str, local_metadata: dict) -> None:
        """State-dict hook (torch and mmengine ``get_state_dict``): store ``prefix + 'mask_mode'``."""
        state_dict[prefix + MASK_MODE_KEY] = encode_mask_mode(module.mask_mode)

    def _check_loaded_mask_mode(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        """Load-time hook: consume the ``mask_mode`` record and warn if it differs from this model's mode.

        Files without the record (converted official weights, older checkpoints) load silently; the record is never
        an unexpected key.
        """
        record = state_dict.pop(prefix + MASK_MODE_KEY, None)
        if record is None:
            return
        trained, name = decode_mask_mode(record), type(self).__name__
        if trained != self.mask_mode:
            warnings.warn(
                f'{name}: the checkpoint was trained with mask_mode={trained!r}, but this model uses '
                f'mask_mode={self.mask_mode!r}; its attention differs from the one the weights learned. Set '
                f'mask_mode={trained!r} in the backbone config unless the change is intended (e.g. fine-tuning '
                'to another mode).', UserWarning, stacklevel=2)


class MaskedAttentionMixin(MaskModeMixin):
    """Backbones whose blocks share one attention ``mask_mode`` and one soft-mask rate ``alpha``, which
    :class:`~mmcausal.engine.SoftMaskHook` sets at run time. Each block's mixer (``block.attn``) carries both."""

    @property
    def soft_mask_rate(self) -> float:
        """Soft-mask rate ``alpha`` of every block (iLLaMA Eq. 2): 0 = the mode's mask, 1 = bidirectional."""
        return self.blocks()[0].attn.soft_mask_rate

    @soft_mask_rate.setter
    def soft_mask_rate(self, alpha: float) -> None:
        if not 0. <= alpha <= 1.:
            raise ConfigValueError(f'soft_mask_rate must be in [0, 1], got {alpha}.')
        for block in self.blocks():
            block.attn.soft_mask_rate = float(alpha)
