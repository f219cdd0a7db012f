"""The pre-norm residual block that every mmcausal transformer backbone stacks, composed from a token mixer and
an optional feed-forward network given to it."""
from typing import Callable, Optional, Union

import torch
from mmcv.cnn.bricks import drop
from mmengine.model import BaseModule
from mmpretrain.models.utils import LayerScale
from torch import Tensor, nn

from .context import TokenLayout
from .norm import build_norm_layer

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
