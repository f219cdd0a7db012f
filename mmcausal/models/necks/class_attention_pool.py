"""A class-attention tail for any backbone: CaiT's class-attention stage (Touvron et al. 2021, Sec. 3) as the
pooling of an image classifier, next to a post-sequence class token (iLLaMA) and global average pooling.

Not in any official code: CaiT only ends its own backbone with it. Here a learned class token reads a backbone's
final patch tokens through ``num_layers`` class-attention blocks; the patch tokens are not changed.
"""
from typing import Optional, Tuple

from mmengine.model import BaseModule
from torch import Tensor

from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError
from ..cait import ClassAttentionStage
from ..layers import build_norm_layer


class PoolInputError(UserInputError, ValueError):
    """The neck got features that are neither a feature map nor a token sequence of its width."""


@MODELS.register_module()
class ClassAttentionPool(BaseModule):
    """``(..., (B, C, H, W) or (B, N, C)) -> ((B, C),)``: ``norm(ClassAttentionStage(patches))``.

    Use it as the ``neck`` of an mmpretrain ``ImageClassifier`` whose backbone returns patch features
    (``out_type='featmap'``), in front of a ``LinearClsHead``. Only the last backbone output is pooled. A token
    sequence must hold patch tokens only: a backbone's own class token in it (``out_type='raw'``) would be read as
    one more patch.

    Args:
        embed_dims: ``C`` (the backbone's width).
        num_heads: heads of the class attention.
        num_layers: class-attention blocks (CaiT: 2).
        mlp_ratio: FFN width / ``C``.
        layer_scale_init_value: initial LayerScale. CaiT gives its class stage the value of its SA blocks, which
            follows the backbone's depth (paper Sec. 2: 0.1 up to 18 blocks, 1e-5 at 24, 1e-6 deeper); the default
            0.1 fits the 12-block backbones. At 1e-5 a 4-block iLLaMA twin learned nothing in 30 epochs (loss
            stayed at ln 4; the LayerScale vectors reached only ~5e-3).
        norm_cfg: norm of the blocks and of the final ``norm`` (LayerNorm eps 1e-6).
        init_cfg: None keeps PyTorch's fan-in Linear init (the class token ~ TruncNormal(0.02) as CaiT). CaiT's own
            TruncNormal(0.02) puts a narrow tail's chained value and output projections in a small-init saddle: on
            the 64-wide iLLaMA twin the loss stayed at ln 4 for all 30 epochs with seed 0 (27 % top-1), against 63 %
            with the fan-in init.
    """

    def __init__(self, embed_dims: int, num_heads: int, num_layers: int = 2, mlp_ratio: float = 4.,
                 layer_scale_init_value: float = .1, norm_cfg: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        norm_cfg = norm_cfg or dict(type='LN', eps=1e-6)
        self.embed_dims = embed_dims
        self.class_attn = ClassAttentionStage(embed_dims, num_heads, num_layers, mlp_ratio, layer_scale_init_value,
                                              norm_cfg)
        self.norm = build_norm_layer(norm_cfg, embed_dims)

    def forward(self, inputs: Tuple[Tensor, ...]) -> Tuple[Tensor]:
        features = inputs[-1]
        if features.dim() == 4 and features.shape[1] == self.embed_dims:
            patches = features.flatten(2).transpose(1, 2)
        elif features.dim() == 3 and features.shape[2] == self.embed_dims:
            patches = features
        else:
            raise PoolInputError(f'ClassAttentionPool(embed_dims={self.embed_dims}) needs a (B, C, H, W) feature map '
                                 f'or (B, N, C) tokens with C = {self.embed_dims}, got {tuple(features.shape)}; set '
                                 'the backbone\'s out_type="featmap" and the neck\'s embed_dims to its width.')
        return (self.norm(self.class_attn(patches)), )
