"""Conventions every plain (single-scale) mmcausal backbone shares with mmpretrain's ``VisionTransformer``:
arch lookup, ``out_indices`` / ``out_type`` outputs, ``frozen_stages`` and layer ids for lr decay."""
from typing import Dict, List, Optional, Sequence, Tuple, Union

from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.backbones.base_backbone import BaseBackbone
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice
from ..layers import split_cls_token

OUT_TYPES = ('raw', 'cls_token', 'featmap', 'avg_featmap')


class BackboneConfigError(UserInputError, ValueError):
    """A backbone argument of the config is invalid (unknown ``arch``, ``out_type``, ``out_indices`` ...)."""


class ImageBatchError(UserInputError, ValueError):
    """The images that reach the backbone are not a non-empty ``(B, in_channels, H, W)`` batch."""


def resolve_arch(arch: Union[str, dict], arch_zoo: Dict[tuple, dict], required: Sequence[str]) -> dict:
    """Look ``arch`` up in ``arch_zoo`` (by name or alias) or validate a custom dict; clear errors otherwise."""
    if isinstance(arch, str):
        key = arch.lower()
        for names, setting in arch_zoo.items():
            if key in names:
                return dict(setting)
        choices = sorted({name for names in arch_zoo for name in names})
        raise BackboneConfigError(f'Unknown arch {arch!r}; choose one of {choices} or pass a dict with keys '
                                  f'{list(required)}.')
    missing = set(required) - set(arch)
    if missing:
        raise BackboneConfigError(f'Custom arch dict is missing keys {sorted(missing)} (needs {list(required)}).')
    return dict(arch)


def check_image_batch(x: Tensor, in_channels: int) -> None:
    """Raise :class:`ImageBatchError` (what to change) unless ``x`` is a ``(B, in_channels, H, W)`` batch
    with ``H, W >= 1``."""
    if x.dim() != 4 or x.shape[1] != in_channels:
        raise ImageBatchError(f'Expected images of shape (B, {in_channels}, H, W), got {tuple(x.shape)}. '
                              'Check the data preprocessor (channel order / batching) or `in_channels`.')
    if x.shape[2] < 1 or x.shape[3] < 1:
        raise ImageBatchError(f'Got an empty image batch of shape {tuple(x.shape)} (H or W is 0). Check the '
                              'image files and the pipeline\'s resize / crop sizes.')


class PlainBackbone(BaseBackbone):
    """Base of the plain backbones: a stem (``patch_embed``, ``cls_token``, ``pos_embed``), ``layers`` and ``norm``.

    Subclasses set ``embed_dims``, ``num_layers``, ``patch_embed``, ``layers``, ``norm``, ``pool_norm`` and
    ``cls_position`` (``'first'``, ``'last'`` or ``None`` without a class token) and call
    :meth:`_set_outputs` / :meth:`_freeze_stages` in ``__init__``.

    Output types: ``'raw'`` all tokens ``(B, N(+1), D)`` in sequence order; ``'cls_token'`` ``(B, D)``;
    ``'featmap'`` ``(B, D, H, W)`` without the class token; ``'avg_featmap'`` ``pool_norm(mean of patches)``.
    """
    stem_parameters = ('cls_token', 'pos_embed')
    cls_position: Optional[str] = None
    with_cp: bool = False  # gradient checkpointing of every block (see :meth:`_run_block`)

    def _set_outputs(self, out_indices: Union[int, Sequence[int]], out_type: str, final_norm: bool,
                     frozen_stages: int) -> None:
        check_choice('out_type', out_type, OUT_TYPES, BackboneConfigError)
        if out_type == 'cls_token' and self.cls_position is None:
            raise BackboneConfigError('out_type="cls_token" needs a class token; set with_cls_token=True or use '
                                      'out_type="avg_featmap".')
        indices = [out_indices] if isinstance(out_indices, int) else list(out_indices)
        normalised = [i + self.num_layers if i < 0 else i for i in indices]
        bad = [i for i, n in zip(indices, normalised) if not 0 <= n < self.num_layers]
        if bad:
            raise BackboneConfigError(f'out_indices {bad} out of range for {self.num_layers} blocks.')
        self.out_indices = normalised
        self.out_type = out_type
        self.final_norm = final_norm
        self.frozen_stages = frozen_stages

    def init_weights(self) -> None:
        """Stem tokens ~ TruncNormal(0.02) first, then ``init_cfg``, so a ``Pretrained`` init overwrites them.

        Runs once: ``BaseModule.init_weights`` skips an initialised module (``is_init``), and so does the stem
        init here, so a second call cannot re-randomise the loaded ``cls_token`` / ``pos_embed``.
        """
        if self.is_init:
            super().init_weights()  # only logs that init_weights was called more than once
            return
        for name in self.stem_parameters:
            param = getattr(self, name, None)
            if isinstance(param, nn.Parameter):
                trunc_normal_(param, std=.02)
        super().init_weights()

    def _freeze_stages(self) -> None:
        """Freeze the stem and the first ``frozen_stages`` blocks (and the final norm when all are frozen)."""
        if self.frozen_stages < 0:
            return
        frozen = [self.patch_embed, *self.layers[:self.frozen_stages]]
        if self.frozen_stages >= self.num_layers:
            frozen += [self.norm, self.pool_norm]
        for name in self.stem_parameters:
            param = getattr(self, name, None)
            if isinstance(param, nn.Parameter):
                param.requires_grad = False
        for module in frozen:
            module.eval()
            for param in module.parameters():
                param.requires_grad = False

    def train(self, mode: bool = True) -> 'PlainBackbone':
        super().train(mode)
        self._freeze_stages()
        return self

    def _run_block(self, block: nn.Module, tokens: Tensor, *args) -> Tensor:
        """``block(tokens, *args)``; with ``with_cp`` (training, grad-enabled) its activations are not stored
        but recomputed in the backward pass (non-reentrant ``torch.utils.checkpoint``; same gradients)."""
        if self.with_cp and self.training and tokens.requires_grad:
            return checkpoint(block, tokens, *args, use_reentrant=False)
        return block(tokens, *args)

    def _after_layer(self, index: int, tokens: Tensor, grid: Tuple[int, int], outs: List[Tensor]) -> Tensor:
        """Apply the final norm after the last block and collect the output of block ``index`` if requested."""
        if index == self.num_layers - 1:
            tokens = self.norm(tokens)
        if index in self.out_indices:
            outs.append(self._format_output(tokens, grid))
        return tokens

    def _format_output(self, tokens: Tensor, grid: Tuple[int, int]) -> Tensor:
        """Turn the ``(B, N(+1), D)`` tokens of one block into the configured ``out_type``."""
        if self.out_type == 'raw':
            return tokens
        patches, cls = split_cls_token(tokens, self.cls_position)
        if self.out_type == 'cls_token':
            return cls
        if self.out_type == 'avg_featmap':
            return self.pool_norm(patches.mean(dim=1))
        return patches.transpose(1, 2).reshape(tokens.shape[0], self.embed_dims, *grid)

    def get_layer_depth(self, param_name: str, prefix: str = '') -> Tuple[int, int]:
        """Layer id of a parameter for layer-wise lr decay: stem 0, block ``i`` -> ``i + 1``, rest ``L + 1``."""
        num_layers = self.num_layers + 2
        if not param_name.startswith(prefix):
            return num_layers - 1, num_layers
        name = param_name[len(prefix):]
        if name.startswith((*self.stem_parameters, 'patch_embed')):
            return 0, num_layers
        if name.startswith('layers.'):
            return int(name.split('.')[1]) + 1, num_layers
        return num_layers - 1, num_layers


def linear_drop_path_rates(drop_path_rate: float, num_layers: int) -> List[float]:
    """Stochastic depth rising linearly from 0 (first block) to ``drop_path_rate`` (last block)."""
    return [drop_path_rate * i / max(num_layers - 1, 1) for i in range(num_layers)]
