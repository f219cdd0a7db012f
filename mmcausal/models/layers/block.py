"""The pre-norm residual block that every mmcausal transformer backbone stacks."""
from typing import Optional

from mmcv.cnn.bricks.drop import DropPath
from mmengine.model import BaseModule
from mmpretrain.models.utils import LayerScale
from torch import Tensor, nn

from .attention import SelfAttention
from .ffn import SwiGLUFFN
from .norm import build_norm_layer


class TransformerBlock(BaseModule):
    """``x = x + DropPath(LS1(Attn(Norm1(x)))); x = x + DropPath(LS2(SwiGLU(Norm2(x))))``.

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
    """

    def __init__(self, embed_dims: int, num_heads: int, ffn_hidden_dims: int, mask_mode: str = 'causal',
                 qkv_bias: bool = True, proj_bias: bool = True, ffn_bias: bool = False,
                 norm_cfg: Optional[dict] = None, drop_path_rate: float = 0., layer_scale_init_value: float = 0.,
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

    @staticmethod
    def _layer_scale(embed_dims: int, init_value: float) -> nn.Module:
        return LayerScale(embed_dims, layer_scale_init_value=init_value) if init_value > 0 else nn.Identity()

    def forward(self, x: Tensor, rope_angles: Optional[Tensor] = None) -> Tensor:
        """``(B, N, D) -> (B, N, D)``; ``rope_angles`` is passed to the attention."""
        x = x + self.drop_path(self.ls1(self.attn(self.norm1(x), rope_angles)))
        return x + self.drop_path(self.ls2(self.ffn(self.norm2(x))))
