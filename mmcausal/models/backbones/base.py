"""The bases every mmcausal backbone builds on, with mmpretrain's conventions (arch lookup, ``out_indices`` /
``out_type`` outputs, ``frozen_stages``, layer ids for lr decay, ``with_cp``) implemented once:

* :class:`PlainBackbone`: one token grid, a stem and a stack of blocks (iLLaMA, VisionLLaMA, De-focus, CaiT);
* :class:`PyramidBackbone`: stages of patch embedding + blocks + optional norm at falling resolution (Twins-style
  Pyramid VisionLLaMA), ``out_indices`` over stages.
"""
import warnings
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_
from mmengine.utils import to_2tuple
from mmpretrain.models.backbones.base_backbone import BaseBackbone
from torch import Tensor, nn
from torch.distributed.fsdp import FullyShardedDataParallel
from torch.utils.checkpoint import checkpoint

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import ConfigValueError, check_choice
from ..layers import (
    MASK_MODES,
    TokenLayout,
    build_patch_embed,
    resize_pos_embed,
    split_cls_token,
    tokens_to_featmap,
)

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


def default_init_cfg() -> List[dict]:
    """Linear layers ~ TruncNormal(0.02) with zero bias (ViT/DeiT/LLaMA); norms keep their 1/0 defaults."""
    return [dict(type='TruncNormal', layer='Linear', std=.02, bias=0.)]


class BlockStackMixin:
    """What every block-stacking backbone shares: gradient checkpointing (``with_cp``) of each block and a
    runtime ``drop_path_rate`` spread over :meth:`blocks` by ``drop_path_schedule`` (a scheduled-drop-path hook
    sets it)."""
    with_cp: bool = False
    #: how ``drop_path_rate`` spreads over :meth:`blocks`: ``'linear'`` (0 at the first block, ViT/DeiT) or
    #: ``'uniform'`` (the same rate in every block, CaiT Sec. 4.1.1)
    drop_path_schedule: str = 'linear'
    _drop_path_rate: float = 0.

    def __init__(self, init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=default_init_cfg() if init_cfg is None else init_cfg)

    def train(self, mode: bool = True):
        super().train(mode)
        self._freeze_stages()
        return self

    @staticmethod
    def _freeze(modules: Sequence[nn.Module]) -> None:
        """Eval mode and no gradients for ``modules`` (kept so by :meth:`train`)."""
        for module in modules:
            module.eval()
            for param in module.parameters():
                param.requires_grad = False

    @staticmethod
    def _normalise_indices(out_indices: Union[int, Sequence[int]], count: int, unit: str) -> List[int]:
        """``out_indices`` (negative allowed) as indices in ``[0, count)``, or a clear error."""
        indices = [out_indices] if isinstance(out_indices, int) else list(out_indices)
        normalised = [i + count if i < 0 else i for i in indices]
        bad = [i for i, n in zip(indices, normalised) if not 0 <= n < count]
        if bad:
            raise BackboneConfigError(f'out_indices {bad} out of range for {count} {unit}.')
        return normalised

    def blocks(self) -> List[nn.Module]:
        """Every :class:`~mmcausal.models.layers.TransformerBlock`, first to last."""
        raise NotImplementedError

    @property
    def drop_path_rate(self) -> float:
        """Stochastic depth of the last block; block ``i`` of ``L`` gets ``rate * i / (L - 1)`` (``'linear'``
        schedule) or ``rate`` (``'uniform'``)."""
        return self._drop_path_rate

    @drop_path_rate.setter
    def drop_path_rate(self, rate: float) -> None:
        if not 0. <= rate < 1.:
            raise BackboneConfigError(f'drop_path_rate must be in [0, 1), got {rate}.')
        blocks = self.blocks()
        rates = linear_drop_path_rates(rate, len(blocks)) if self.drop_path_schedule == 'linear' else \
            [rate] * len(blocks)
        for block, block_rate in zip(blocks, rates):
            # sharded training wraps each block in an FSDP unit, which forwards reads to it but not writes
            inner = block.module if isinstance(block, FullyShardedDataParallel) else block
            inner.drop_path_rate = block_rate
        self._drop_path_rate = float(rate)

    def _run_block(self, block: nn.Module, tokens: Tensor, layout: TokenLayout) -> Tensor:
        """``block(tokens, layout)``; with ``with_cp`` (training, grad-enabled) its activations are not stored
        but recomputed in the backward pass (non-reentrant ``torch.utils.checkpoint``; same gradients)."""
        if self.with_cp and self.training and tokens.requires_grad:
            return checkpoint(block, tokens, layout, use_reentrant=False)
        return block(tokens, layout)


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


class PlainBackbone(BlockStackMixin, BaseBackbone):
    """Base of the plain backbones: a stem (``patch_embed``, ``cls_token``, ``pos_embed``), ``layers`` and ``norm``.

    Subclasses set ``embed_dims``, ``num_layers``, ``patch_embed`` (:meth:`_build_patch_embed`), ``layers``,
    ``norm``, ``pool_norm`` and ``cls_position`` (``'first'``, ``'last'`` or ``None`` without a class token), call
    :meth:`_set_outputs` / :meth:`_freeze_stages` in ``__init__`` and run the blocks with :meth:`run_layers`.

    Output types: ``'raw'`` all tokens ``(B, N(+1), D)`` in sequence order; ``'cls_token'`` ``(B, D)``;
    ``'featmap'`` ``(B, D, H, W)`` without the class token; ``'avg_featmap'`` ``pool_norm(mean of patches)``.
    """
    stem_parameters = ('cls_token', 'pos_embed')
    cls_position: Optional[str] = None

    @property
    def has_cls_token(self) -> bool:
        """Whether ``out_type='cls_token'`` exists: a class token in the sequence (CaiT's joins after the blocks)."""
        return self.cls_position is not None

    def blocks(self) -> List[nn.Module]:
        return list(self.layers)

    def _build_patch_embed(self, in_channels: int, patch_size: int, img_size: Union[int, Sequence[int]]) -> None:
        """``patch_embed``: a ``patch_size`` conv (mmcv ``PatchEmbed``, ``layers.build_patch_embed``)
        that zero-pads any input at the bottom/right to a multiple of the patch size; ``patch_resolution`` is its grid
        at ``img_size``."""
        self.in_channels = in_channels
        self.patch_embed = build_patch_embed(in_channels, self.embed_dims, patch_size, bias=True,
                                             input_size=to_2tuple(img_size))
        self.patch_resolution = self.patch_embed.init_out_size

    def _resize_loaded_pos_embed(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        """Load-time hook (register it where a ``pos_embed`` exists): resize a checkpoint's square position table
        (e.g. 224 px) to this model's grid; the table has a class-token row unless ``cls_position`` is None."""
        key = prefix + 'pos_embed'
        if key not in state_dict or state_dict[key].shape == self.pos_embed.shape:
            return
        extra = int(self.cls_position is not None)
        side = int((state_dict[key].shape[1] - extra) ** 0.5)
        if side * side + extra != state_dict[key].shape[1]:
            rows = 'plus one class-token row' if extra else 'without a class-token row'
            raise BackboneConfigError(f'Cannot resize {key} of shape {tuple(state_dict[key].shape)}: '
                                      f'expected a square patch grid {rows}.')
        state_dict[key] = resize_pos_embed(state_dict[key], (side, side), self.patch_resolution,
                                           cls_position=self.cls_position)

    def _set_outputs(self, out_indices: Union[int, Sequence[int]], out_type: str, final_norm: bool,
                     frozen_stages: int) -> None:
        check_choice('out_type', out_type, OUT_TYPES, BackboneConfigError)
        if out_type == 'cls_token' and not self.has_cls_token:
            raise BackboneConfigError('out_type="cls_token" needs a class token; set with_cls_token=True or use '
                                      'out_type="avg_featmap".')
        self.out_indices = self._normalise_indices(out_indices, self.num_layers, 'blocks')
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
            frozen += self._after_blocks()
        for name in self.stem_parameters:
            param = getattr(self, name, None)
            if isinstance(param, nn.Parameter):
                param.requires_grad = False
        self._freeze(frozen)

    def _after_blocks(self) -> List[nn.Module]:
        """The modules after the last block (frozen with it by ``frozen_stages >= num_layers``)."""
        return [self.norm, self.pool_norm]

    def run_layers(self, tokens: Tensor, layout: TokenLayout) -> Tuple[Tensor, ...]:
        """Run every block on the ``(B, N(+1), D)`` tokens; the final norm follows the last block, and the output
        of each block in ``out_indices`` is formatted as ``out_type``."""
        outs: List[Tensor] = []
        for i, layer in enumerate(self.layers):
            tokens = self._run_block(layer, tokens, layout)
            if i == self.num_layers - 1:
                tokens = self.norm(tokens)
            if i in self.out_indices:
                outs.append(self._format_output(tokens, layout))
        return tuple(outs)

    def _format_output(self, tokens: Tensor, layout: TokenLayout) -> Tensor:
        """Turn the ``(B, N(+1), D)`` tokens of one block into the configured ``out_type``: patches back in raster
        order when the layout reordered them, without the padding the backbone added beyond the image's grid."""
        if self.out_type == 'raw':
            return tokens
        patches, cls = split_cls_token(tokens, layout.cls_position)
        if self.out_type == 'cls_token':
            return cls
        grid = layout.grid
        if layout.order is not None:
            patches = patches[:, layout.order.argsort()]
        if layout.image_grid is not None and tuple(layout.image_grid) != tuple(grid):
            grid = tuple(layout.image_grid)
            patches = patches.unflatten(1, layout.grid)[:, :grid[0], :grid[1]].flatten(1, 2)
        if self.out_type == 'avg_featmap':
            return self.pool_norm(patches.mean(dim=1))
        return tokens_to_featmap(patches, grid)

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


class PyramidStage(BaseModule):
    """One stage of a :class:`PyramidBackbone`: ``patch_embed`` (``(B, C, H, W) -> (B, h*w, D), (h, w)``, e.g. mmcv
    ``PatchEmbed`` with its norm), ``blocks`` and ``norm`` (``nn.Identity`` without ``norm_after_stage``)."""

    def __init__(self, patch_embed: nn.Module, blocks: Sequence[nn.Module], norm: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.patch_embed = patch_embed
        self.blocks = nn.ModuleList(blocks)
        self.norm = norm if norm is not None else nn.Identity()


class PyramidBackbone(BlockStackMixin, BaseBackbone):
    """Base of the stage-based backbones: ``stages`` (:class:`PyramidStage`), an optional final ``norm`` and
    ``pool_norm`` after the last stage.

    Each stage embeds the previous feature map, runs its blocks with the :class:`TokenLayout` that
    :meth:`stage_layout` builds for its grid, applies its norm and becomes the ``(B, D_s, H_s, W_s)`` map of the
    next stage. Subclasses set ``in_channels``, ``stages``, ``norm``, ``pool_norm`` and call :meth:`_set_outputs` /
    :meth:`_freeze_stages` in ``__init__``.

    Output types: ``'featmap'`` the map of every stage in ``out_indices`` (dense prediction); ``'avg_featmap'``
    ``pool_norm(mean of norm(tokens))`` of those stages (classification; the final ``norm`` applies to the last
    stage only).
    """
    out_types = ('featmap', 'avg_featmap')

    def stage_layout(self, index: int, grid: Tuple[int, int], tokens: Tensor) -> TokenLayout:
        """The position context of stage ``index`` at grid ``(H, W)`` (e.g. its own RoPE policy)."""
        raise NotImplementedError

    def blocks(self) -> List[nn.Module]:
        return [block for stage in self.stages for block in stage.blocks]

    def _set_outputs(self, out_indices: Union[int, Sequence[int]], out_type: str, frozen_stages: int) -> None:
        check_choice('out_type', out_type, self.out_types, BackboneConfigError)
        self.out_indices = sorted(self._normalise_indices(out_indices, len(self.stages), 'stages'))
        self.out_type = out_type
        self.frozen_stages = frozen_stages

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """``(B, C, H, W)`` images -> one output per stage in ``out_indices`` (see ``out_type``)."""
        check_image_batch(x, self.in_channels)
        outs: List[Tensor] = []
        for index, stage in enumerate(self.stages):
            tokens, grid = stage.patch_embed(x)
            layout = self.stage_layout(index, grid, tokens)
            for block in stage.blocks:
                tokens = self._run_block(block, tokens, layout)
            tokens = stage.norm(tokens)
            if index == len(self.stages) - 1:
                tokens = self.norm(tokens)
            x = tokens_to_featmap(tokens, grid)
            if index in self.out_indices:
                outs.append(x if self.out_type == 'featmap' else self.pool(tokens))
        return tuple(outs)

    def pool(self, tokens: Tensor) -> Tensor:
        """``(B, N, D)`` tokens of a stage -> ``pool_norm(mean)`` ``(B, D)`` (the ``avg_featmap`` output)."""
        return self.pool_norm(tokens.mean(dim=1))

    def _freeze_stages(self) -> None:
        """``frozen_stages = k >= 0``: freeze the first patch embedding and the whole first ``k`` stages (and the
        final norms when every stage is frozen)."""
        if self.frozen_stages < 0:
            return
        frozen = [self.stages[0].patch_embed, *self.stages[:self.frozen_stages]]
        if self.frozen_stages >= len(self.stages):
            frozen += [self.norm, self.pool_norm]
        self._freeze(frozen)

    def get_layer_depth(self, param_name: str, prefix: str = '') -> Tuple[int, int]:
        """Layer id for layer-wise lr decay, counting blocks across stages: the first patch embedding 0, block
        ``j`` of stage ``s`` -> ``1 + (blocks before stage s) + j``, a later patch embedding the id of its
        stage's first block, a stage norm the id of its last block, everything else ``L + 1``."""
        depths = [len(stage.blocks) for stage in self.stages]
        num_layers = sum(depths) + 2
        if not param_name.startswith(prefix + 'stages.'):
            return num_layers - 1, num_layers
        stage, part, *rest = param_name[len(prefix + 'stages.'):].split('.')
        first = 1 + sum(depths[:int(stage)])
        if part == 'patch_embed':
            return (0 if stage == '0' else first), num_layers
        if part == 'blocks':
            return first + int(rest[0]), num_layers
        return first + depths[int(stage)] - 1, num_layers


def linear_drop_path_rates(drop_path_rate: float, num_layers: int) -> List[float]:
    """Stochastic depth rising linearly from 0 (first block) to ``drop_path_rate`` (last block)."""
    return [drop_path_rate * i / max(num_layers - 1, 1) for i in range(num_layers)]
