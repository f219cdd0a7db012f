"""The base of the plain backbones (iLLaMA, VisionLLaMA, De-focus, CaiT): one token grid, a stem and a stack of
blocks, with mmpretrain's conventions (arch lookup, ``out_indices`` / ``out_type`` outputs, ``frozen_stages``, layer
ids for lr decay, ``with_cp``) implemented once.

The stem's parts live here too: the class-token slot (:func:`insert_cls_token` / :func:`split_cls_token`; iLLaMA
and De-focus put it after the patches, "post-sequence [cls]", ViT and CaiT first) and the absolute position
tables (resizing a checkpoint's table to another grid; the fixed 2-D sin-cos table of MAE and DiT).
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_
from mmengine.utils import to_2tuple
from mmpretrain.models.backbones.base_backbone import BaseBackbone
from mmpretrain.models.utils import resize_pos_embed as _resize_cls_first
from torch import Tensor, nn

from mmcausal.utils.validation import ConfigValueError, check_choice
from .block import BackboneConfigError, BlockStackMixin, build_patch_embed
from .position import TokenLayout, grid_positions, tokens_to_featmap

OUT_TYPES = ('raw', 'cls_token', 'featmap', 'avg_featmap')


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


def resize_pos_embed(pos_embed: Tensor, src_shape: Sequence[int], dst_shape: Sequence[int],
                     cls_position: Optional[str] = 'first', mode: str = 'bicubic') -> Tensor:
    """Resize a ``(1, h*w [+1], D)`` table from grid ``src_shape`` to ``dst_shape`` (non-square aware).

    The patch rows are interpolated as an image (``align_corners=False``); the class-token row, first or
    last (``cls_position``; ``None`` = no class row), is kept as it is. Wraps mmpretrain's
    ``resize_pos_embed``, which only knows leading extra tokens. Under ``torch.export`` (ONNX export) the table is
    always interpolated, so a graph with a symbolic grid resizes it to the input's grid (at the same size the
    interpolation is exact: every sample falls on a source row).
    """
    if torch.compiler.is_exporting():
        return _interpolate_patch_rows(pos_embed, src_shape, dst_shape, cls_position, mode)
    if cls_position != 'last':
        return _resize_cls_first(pos_embed, src_shape, dst_shape, mode=mode,
                                 num_extra_tokens=int(cls_position == 'first'))
    moved = torch.cat((pos_embed[:, -1:], pos_embed[:, :-1]), dim=1)
    resized = _resize_cls_first(moved, src_shape, dst_shape, mode=mode, num_extra_tokens=1)
    return torch.cat((resized[:, 1:], resized[:, :1]), dim=1)


def _interpolate_patch_rows(pos_embed: Tensor, src_shape: Sequence[int], dst_shape: Sequence[int],
                            cls_position: Optional[str], mode: str) -> Tensor:
    """:func:`resize_pos_embed` without the same-size shortcut (a branch on the grid that a graph cannot keep)."""
    start, stop = (1, None) if cls_position == 'first' else (0, -1 if cls_position == 'last' else None)
    patches = pos_embed[:, start:stop].unflatten(1, tuple(src_shape)).permute(0, 3, 1, 2)
    resized = F.interpolate(patches.float(), size=tuple(dst_shape), mode=mode, align_corners=False)
    resized = resized.flatten(2).transpose(1, 2).to(pos_embed.dtype)
    if cls_position is None:
        return resized
    cls = pos_embed[:, :1] if cls_position == 'first' else pos_embed[:, -1:]
    return torch.cat((cls, resized) if cls_position == 'first' else (resized, cls), dim=1)


def sincos_pos_embed_2d(grid: Tuple[int, int], embed_dims: int, device: Optional[torch.device] = None) -> Tensor:
    """DiT's fixed 2-D sin-cos table ``(H*W, D)`` (fp32) of a row-major ``(H, W)`` grid.

    Token ``n`` sits at column ``x = n % W`` and row ``y = n // W``; with ``w_k = 10000^(-k / (D/4))``, ``k < D/4``,
    its row is ``[sin(x w), cos(x w), sin(y w), cos(y w)]`` (the column in the first half). Computed in fp64.
    """
    if embed_dims % 4:
        raise ConfigValueError(f'The sin-cos table needs embed_dims divisible by 4, got {embed_dims}.')
    quarter = embed_dims // 4
    freqs = 10000. ** -(torch.arange(quarter, dtype=torch.float64, device=device) / quarter)
    positions = grid_positions(grid, device=device).double()
    along_x = positions[:, 1:2] * freqs
    along_y = positions[:, 0:1] * freqs
    return torch.cat((along_x.sin(), along_x.cos(), along_y.sin(), along_y.cos()), dim=1).float()


CLS_POSITIONS = ('first', 'last')


def cls_position_for(mask_mode: str) -> str:
    """Where a backbone that follows its mask puts the class token: ``'first'`` (ViT) under ``'bidirectional'``
    attention, where every slot sees every token, and ``'last'`` under a causal mask (``'causal'``,
    ``'official'``), the only slot that sees every patch."""
    return 'first' if mask_mode == 'bidirectional' else 'last'


def insert_cls_token(patches: Tensor, cls_token: Tensor, position: str) -> Tensor:
    """``patches`` ``(B, N, D)`` + ``cls_token`` ``(1, 1, D)`` -> ``(B, N + 1, D)`` with cls first or last."""
    cls_tokens = cls_token.expand(patches.shape[0], -1, -1)
    pieces = (cls_tokens, patches) if position == 'first' else (patches, cls_tokens)
    return torch.cat(pieces, dim=1)


def split_cls_token(tokens: Tensor, position: Optional[str]) -> Tuple[Tensor, Optional[Tensor]]:
    """Inverse of :func:`insert_cls_token`: ``(B, N + 1, D) -> (patches (B, N, D), cls (B, D))``.

    ``position=None`` means the sequence has no class token (cls is returned as ``None``).
    """
    if position is None:
        return tokens, None
    if position == 'first':
        return tokens[:, 1:], tokens[:, 0]
    return tokens[:, :-1], tokens[:, -1]

