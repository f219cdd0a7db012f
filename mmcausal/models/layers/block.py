"""The pre-norm residual block every mmcausal transformer stacks, its parts and the stack itself.

* :class:`RMSNorm` (Zhang & Sennrich 2019; LLaMA, iLLaMA, Mamba): ``y = x / sqrt(mean(x^2) + eps) * w``, torch's
  module registered so configs can say ``norm_cfg=dict(type='RMSNorm')`` next to mmcv's ``'LN'`` (both built by
  mmpretrain's ``build_norm_layer``);
* the feed-forward networks: SwiGLU (Shazeer 2020; mmpretrain's :class:`~mmpretrain.models.utils.SwiGLUFFN`,
  ``w3(silu(x W1) * (x W2))`` with ``W1, W2`` fused into ``w12``) with LLaMA's width rule, and mmcv's GELU MLP
  (``fc2(act(fc1(x)))``, keys ``layers.0.0`` / ``layers.1``); blocks call them with ``add_identity=False`` (the
  residual lives in the block);
* :class:`DropPath` and :class:`TransformerBlock`
  ``x = x + DropPath(LS1(Mixer(Norm1(x), layout))); x = x + DropPath(LS2(FFN(Norm2(x))))``;
* :class:`BlockStackMixin`, what every block-stacking backbone shares (gradient checkpointing, the drop-path
  schedule, freezing), and what its stem does first: check the images and embed them as patches, zero-padding any
  input to whole patches (:class:`CornerPadding`).


Their CPU fast paths (RMSNorm and SwiGLU backward) are in :mod:`.fast_paths`.
"""
from typing import Callable, List, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from mmcv.cnn.bricks import drop
from mmcv.cnn.bricks.transformer import FFN, PatchEmbed
from mmengine.model import BaseModule
from mmpretrain.models.utils import LayerScale, build_norm_layer
from mmpretrain.models.utils import SwiGLUFFN as _UpstreamSwiGLUFFN
from torch import Tensor, nn
from torch.distributed.fsdp import FullyShardedDataParallel
from torch.utils.checkpoint import checkpoint

from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError
from .fast_paths import RMSNormFunction, gated_projection
from .position import TokenLayout


class RMSNorm(nn.RMSNorm):
    """:class:`torch.nn.RMSNorm` (same arguments and parameters, values equal up to rounding) whose backward keeps one
    activation-sized tensor (its input) instead of two on CPU, see :class:`RMSNormFunction`; elsewhere torch's
    fused kernel already keeps only the input and ``rstd``. ``(..., *shape)`` in and out."""

    def forward(self, x: Tensor) -> Tensor:
        if x.device.type != 'cpu':
            return super().forward(x)
        # torch's default eps: that of the computation dtype (fp32 for fp32 / half inputs, fp64 for fp64)
        eps = torch.finfo(torch.promote_types(x.dtype, torch.float32)).eps if self.eps is None else self.eps
        return RMSNormFunction.apply(x, self.weight, len(self.normalized_shape), eps)


MODELS.register_module('RMSNorm', module=RMSNorm)


class SwiGLUFFN(_UpstreamSwiGLUFFN):
    """mmpretrain's SwiGLU FFN ``w3(silu(x W1) * (x W2))`` with the gate and ``w3`` of :func:`gated_projection`.

    ``(..., D) -> (..., out_dims)``; arguments, parameters and state-dict keys are mmpretrain's. Per token the
    backward keeps ``2h`` hidden values (the ``w12`` output) instead of autograd's ``4h``: with the
    parameter-matched width ``h = 2/3 * 4D`` that is ``5.3D``, less than the ``8D`` of a GELU MLP. With a
    ``norm_cfg`` (a norm between the gate and ``w3``) the gate is composed by autograd.
    """

    def forward(self, x: Tensor, identity: Tensor | None = None) -> Tensor:
        hidden = self.w12(x)
        # the compiler fuses the gate and plans what backward keeps itself
        if torch.compiler.is_compiling() or not isinstance(self.norm, nn.Identity):
            gate, up = hidden.chunk(2, dim=-1)
            out = self.w3(self.norm(F.silu(gate) * up))
        else:
            out = gated_projection(hidden, self.w3)
        out = self.dropout_layer(self.gamma2(out))
        if self.out_dims != self.embed_dims or not self.add_identity:
            return out
        return (x if identity is None else identity) + out


def gelu_mlp(embed_dims: int, feedforward_channels: int, approximate: str = 'none') -> FFN:
    """ViT/CaiT MLP ``fc2(GELU(fc1(x)))`` (exact erf GELU; ``approximate='tanh'`` for DiT), ``(..., D) -> (..., D)``:
    mmcv's ``FFN`` (keys ``layers.0.0`` / ``layers.1``) without its residual and with GELU instead of its ReLU
    default."""
    return FFN(embed_dims=embed_dims, feedforward_channels=feedforward_channels,
               act_cfg=dict(type='GELU', approximate=approximate), add_identity=False)


def swiglu_hidden_dims(embed_dims: int, mlp_ratio: float = 4., multiple_of: int = 256) -> int:
    """LLaMA/iLLaMA SwiGLU width: ``int(2/3 * mlp_ratio * D)`` rounded up to a multiple of ``multiple_of``.

    Keeps the parameter count of a ``mlp_ratio`` GELU MLP (e.g. D=192 -> 512, D=768 -> 2048, D=1024 -> 2816).
    """
    hidden = int(2 * mlp_ratio * embed_dims / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


ModuleFactory = Callable[[int], nn.Module]  # a class or functools.partial called with embed_dims


class DropPath(drop.DropPath):
    """mmcv's stochastic depth (same ``drop_prob`` attribute and random draws): ``x * floor(keep + u) / keep`` with
    one ``u ~ U[0, 1)`` per sample. :meth:`residual` adds it to the residual stream in one pass (``addcmul``, with
    ``1 / keep`` applied in the op's compute precision, so bf16 is rounded once per element as in mmcv); mmcv
    divides, multiplies and then the block adds: three activation-sized passes forward and two backward.

    ``drop_prob`` is mirrored in the non-persistent 0-dim buffer ``keep_prob`` (``1 - drop_prob``), which compiled
    code reads: a scheduled rate then changes an input value, not the graph (the compiler guards only on whether
    anything is dropped)."""

    def __init__(self, drop_prob: float = 0.1) -> None:
        nn.Module.__init__(self)  # mmcv's __init__ only sets drop_prob, whose setter needs the buffer first
        self.register_buffer('keep_prob', torch.ones(()), persistent=False)
        self.drop_prob = drop_prob

    @property
    def drop_prob(self) -> float:
        """Probability of dropping a sample's branch, in ``[0, 1)``; may change between iterations."""
        return self._drop_prob

    @drop_prob.setter
    def drop_prob(self, rate: float) -> None:
        self._drop_prob = float(rate)
        self._drops = rate > 0.
        with torch.no_grad():
            self.keep_prob.fill_(1. - rate)

    def _keep(self) -> Union[float, Tensor]:
        """``1 - drop_prob``: the float in eager code (mmcv's arithmetic), the buffer under ``torch.compile``."""
        return self.keep_prob if torch.compiler.is_compiling() else 1. - self._drop_prob

    def keep_mask(self, x: Tensor) -> Optional[Tensor]:
        """``(B, 1, ...)`` per-sample ``floor(keep + u)`` (1 = keep, 0 = drop), or None when nothing is dropped."""
        if not self._drops or not self.training:
            return None
        shape = (x.shape[0], ) + (1, ) * (x.dim() - 1)
        return (self._keep() + torch.rand(shape, dtype=x.dtype, device=x.device)).floor_()

    def forward(self, x: Tensor) -> Tensor:
        mask = self.keep_mask(x)
        return x if mask is None else (x * mask).mul_(1. / self._keep())

    def residual(self, identity: Tensor, branch: Tensor) -> Tensor:
        """``identity + self(branch)`` in one pass."""
        mask = self.keep_mask(branch)
        if mask is None:
            return identity + branch
        keep = self._keep()
        if isinstance(keep, Tensor):
            return torch.addcmul(identity, branch, mask / keep)
        return torch.addcmul(identity, branch, mask, value=1. / keep)


class TransformerBlock(BaseModule):
    """``x = x + DropPath(LS1(Mixer(Norm1(x), layout))); x = x + DropPath(LS2(FFN(Norm2(x))))``.

    The mixer (global / windowed / sub-sampled attention, a scan ...) and the FFN (SwiGLU, GELU MLP) are
    factories called with ``embed_dims``; ``ffn=None`` leaves out the second branch (Mamba-style blocks).
    Submodule names (``norm1``, ``attn``, ``ls1``, ``norm2``, ``ffn``, ``ls2``) are the state-dict contract of
    the converters.

    Args:
        embed_dims: token width ``D``.
        mixer: token-mixer factory; the module's ``forward(x, layout)`` maps ``(B, N, D) -> (B, N, D)``.
        ffn: FFN factory (``forward(x)``, no residual inside), or None.
        norm_cfg: ``dict(type='RMSNorm' | 'LN', eps=...)``.
        drop_path_rate: stochastic depth rate of the residual branches (settable at run time).
        layer_scale_init_value: LayerScale (CaiT) initial value; 0 disables it.
        ffn_drop_path: apply drop path to the FFN branch too (False reproduces VisionLLaMA's MAE code,
            which drops only the attention branch).
    """

    def __init__(self, embed_dims: int, mixer: ModuleFactory, ffn: Optional[ModuleFactory] = None,
                 norm_cfg: Optional[dict] = None, drop_path_rate: float = 0., layer_scale_init_value: float = 0.,
                 ffn_drop_path: bool = True, init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        norm_cfg = norm_cfg or dict(type='RMSNorm', eps=1e-6)
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)
        self.attn = mixer(embed_dims)
        self.ls1 = self._layer_scale(embed_dims, layer_scale_init_value)
        self.with_ffn = ffn is not None
        if self.with_ffn:
            self.norm2 = build_norm_layer(norm_cfg, embed_dims)
            self.ffn = ffn(embed_dims)
            self.ls2 = self._layer_scale(embed_dims, layer_scale_init_value)
        self.drop_path = DropPath(drop_path_rate)
        self.ffn_drop_path = ffn_drop_path

    @staticmethod
    def _layer_scale(embed_dims: int, init_value: float) -> nn.Module:
        return LayerScale(embed_dims, layer_scale_init_value=init_value) if init_value > 0 else nn.Identity()

    @property
    def drop_path_rate(self) -> float:
        """Stochastic-depth rate of this block (a scheduled-drop-path hook may change it between iterations)."""
        return self.drop_path.drop_prob

    @drop_path_rate.setter
    def drop_path_rate(self, rate: float) -> None:
        self.drop_path.drop_prob = float(rate)

    def forward(self, x: Tensor, layout: Optional[TokenLayout] = None) -> Tensor:
        """``(B, N, D) -> (B, N, D)``; ``layout`` (grid, RoPE angles ...) goes to the mixer."""
        x = self.drop_path.residual(x, self.ls1(self.attn(self.norm1(x), layout)))
        if not self.with_ffn:
            return x
        ffn_out = self.ls2(self.ffn(self.norm2(x)))
        return self.drop_path.residual(x, ffn_out) if self.ffn_drop_path else x + ffn_out


class BackboneConfigError(UserInputError, ValueError):
    """A backbone argument of the config is invalid (unknown ``arch``, ``out_type``, ``out_indices`` ...)."""


class ImageBatchError(UserInputError, ValueError):
    """The images that reach the backbone are not a non-empty ``(B, in_channels, H, W)`` batch."""


def check_image_batch(x: Tensor, in_channels: int) -> None:
    """Raise :class:`ImageBatchError` (what to change) unless ``x`` is a ``(B, in_channels, H, W)`` batch
    with ``H, W >= 1``."""
    if x.dim() != 4 or x.shape[1] != in_channels:
        raise ImageBatchError(f'Expected images of shape (B, {in_channels}, H, W), got {tuple(x.shape)}. '
                              'Check the data preprocessor (channel order / batching) or `in_channels`.')
    if x.shape[2] < 1 or x.shape[3] < 1:
        raise ImageBatchError(f'Got an empty image batch of shape {tuple(x.shape)} (H or W is 0). Check the '
                              'image files and the pipeline\'s resize / crop sizes.')


class CornerPadding(nn.Module):
    """``(B, C, H, W) -> (B, C, H + (-H mod s), W + (-W mod s))``: zeros at the bottom/right up to multiples of
    ``stride``.

    mmcv's ``AdaptivePadding`` does the same with ``math.ceil`` and an ``if pad > 0`` on the size: an export traced
    at a multiple of the stride records that branch as a condition and drops the padding, and its graph then fails
    (or cuts the image) at other sides. Here the amounts are symbolic (``-H mod s``) and the export always pads (by 0
    at multiples); the eager path keeps the skip.
    """

    def __init__(self, stride: int) -> None:
        super().__init__()
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        pad_h, pad_w = -x.shape[-2] % self.stride, -x.shape[-1] % self.stride
        if torch.compiler.is_exporting() or pad_h or pad_w:
            x = F.pad(x, (0, pad_w, 0, pad_h))
        return x

    def extra_repr(self) -> str:
        return f'stride={self.stride}'


def build_patch_embed(in_channels: int, embed_dims: int, patch_size: int, **kwargs) -> PatchEmbed:
    """mmcv's ``PatchEmbed`` with ``kernel_size = stride = patch_size``, ``padding='corner'`` (any input size: zero
    padding at the bottom/right to whole patches, by :class:`CornerPadding`); ``kwargs`` go to ``PatchEmbed``
    (``norm_cfg``, ``input_size``, ``bias``, ...). Same parameters and outputs as the mmcv module."""
    embed = PatchEmbed(in_channels=in_channels, embed_dims=embed_dims, conv_type='Conv2d', kernel_size=patch_size,
                       stride=patch_size, padding='corner', **kwargs)
    embed.adaptive_padding = CornerPadding(patch_size)
    return embed


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


def linear_drop_path_rates(drop_path_rate: float, num_layers: int) -> List[float]:
    """Stochastic depth rising linearly from 0 (first block) to ``drop_path_rate`` (last block)."""
    return [drop_path_rate * i / max(num_layers - 1, 1) for i in range(num_layers)]
