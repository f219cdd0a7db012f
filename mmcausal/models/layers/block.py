"""The pre-norm residual block that every mmcausal transformer backbone stacks."""
from typing import Optional, Tuple

from mmcv.cnn.bricks.drop import DropPath
from mmengine.model import BaseModule
from mmpretrain.models.utils import LayerScale
from torch import Tensor, nn

from .attention import SelfAttention
from .ffn import SwiGLUFFN
from .norm import build_norm_layer
from .window import window_key_mask, window_partition, window_unpartition


class TransformerBlock(BaseModule):
    """``x = x + DropPath(LS1(Attn(Norm1(x)))); x = x + DropPath(LS2(SwiGLU(Norm2(x))))``.

    With ``window_size > 0`` the attention runs inside non-overlapping ``ws x ws`` windows of the token grid
    (ViTDet); the block then needs ``grid_size`` and expects window-local ``rope_angles`` ``(ws*ws, hd/2)``.

    Args:
        embed_dims: token width ``D``.
        num_heads: attention heads.
        ffn_hidden_dims: SwiGLU hidden width (see :func:`~mmcausal.models.layers.swiglu_hidden_dims`).
        mask_mode: attention masking mode (:data:`~mmcausal.models.layers.MASK_MODES`).
        qkv_bias, proj_bias: biases of the attention projections.
        ffn_bias: biases of the SwiGLU projections.
        norm_cfg: ``dict(type='RMSNorm' | 'LN', eps=...)``.
        drop_path_rate: stochastic depth rate of both residual branches.
        layer_scale_init_value: LayerScale (CaiT) initial value; 0 disables it.
        ffn_drop_path: apply drop path to the FFN branch too (False reproduces VisionLLaMA's MAE code,
            which drops only the attention branch).
        window_size: windowed attention with this window (in tokens); 0 = global attention.
        mask_window_padding: hide the zero padding of overhanging windows from the keys (False = the
            official ViTDet/VisionLLaMA behaviour, which attends to it).
    """

    def __init__(self, embed_dims: int, num_heads: int, ffn_hidden_dims: int, mask_mode: str = 'causal',
                 qkv_bias: bool = True, proj_bias: bool = True, ffn_bias: bool = False,
                 norm_cfg: Optional[dict] = None, drop_path_rate: float = 0., layer_scale_init_value: float = 0.,
                 ffn_drop_path: bool = True, window_size: int = 0, mask_window_padding: bool = True,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        norm_cfg = norm_cfg or dict(type='RMSNorm', eps=1e-6)
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)
        self.attn = SelfAttention(embed_dims, num_heads, qkv_bias=qkv_bias, proj_bias=proj_bias,
                                  mask_mode=mask_mode)
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)
        self.ffn = SwiGLUFFN(embed_dims, ffn_hidden_dims, bias=ffn_bias, add_identity=False)
        self.ls1 = self._layer_scale(embed_dims, layer_scale_init_value)
        self.ls2 = self._layer_scale(embed_dims, layer_scale_init_value)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()
        self.ffn_drop_path = ffn_drop_path
        self.window_size = window_size
        self.mask_window_padding = mask_window_padding

    @staticmethod
    def _layer_scale(embed_dims: int, init_value: float) -> nn.Module:
        return LayerScale(embed_dims, layer_scale_init_value=init_value) if init_value > 0 else nn.Identity()

    def forward(self, x: Tensor, rope_angles: Optional[Tensor] = None,
                grid_size: Optional[Tuple[int, int]] = None) -> Tensor:
        """``(B, N, D) -> (B, N, D)``; ``rope_angles`` goes to the attention, ``grid_size`` ``(H, W)`` to windows."""
        x = x + self.drop_path(self.ls1(self._attend(self.norm1(x), rope_angles, grid_size)))
        ffn_out = self.ls2(self.ffn(self.norm2(x)))
        return x + (self.drop_path(ffn_out) if self.ffn_drop_path else ffn_out)

    def _attend(self, x: Tensor, rope_angles: Optional[Tensor], grid_size: Optional[Tuple[int, int]]) -> Tensor:
        if not self.window_size:
            return self.attn(x, rope_angles)
        if grid_size is None or grid_size[0] * grid_size[1] != x.shape[1]:
            raise ValueError(f'Windowed attention needs the (H, W) token grid of the {x.shape[1]} tokens, '
                             f'got grid_size={grid_size} (a class token cannot be windowed).')
        windows, padded = window_partition(x, grid_size, self.window_size)
        key_mask = window_key_mask(grid_size, self.window_size, x.shape[0], x.device) \
            if self.mask_window_padding else None
        out = self.attn(windows, rope_angles, key_mask=key_mask)
        return window_unpartition(out, grid_size, padded, self.window_size)

    def extra_repr(self) -> str:
        return f'window_size={self.window_size}' if self.window_size else ''
