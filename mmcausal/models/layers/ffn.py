"""Feed-forward layers: SwiGLU (Shazeer 2020) with the LLaMA width rule, and the GELU MLP of ViT/CaiT.

Both modules come from upstream: mmpretrain's :class:`~mmpretrain.models.utils.SwiGLUFFN`
(``w3(silu(x W1) * (x W2))`` with ``W1, W2`` fused into ``w12``) and mmcv's
:class:`~mmcv.cnn.bricks.transformer.FFN` (``fc2(GELU(fc1(x)))``, keys ``layers.0.0`` / ``layers.1``). Blocks use
them with ``add_identity=False`` (the residual lives in the block); this file only adds the SwiGLU width rule.
"""
from mmcv.cnn.bricks.transformer import FFN
from mmpretrain.models.utils import SwiGLUFFN


def swiglu_hidden_dims(embed_dims: int, mlp_ratio: float = 4., multiple_of: int = 256) -> int:
    """LLaMA/iLLaMA SwiGLU width: ``int(2/3 * mlp_ratio * D)`` rounded up to a multiple of ``multiple_of``.

    Keeps the parameter count of a ``mlp_ratio`` GELU MLP (e.g. D=192 -> 512, D=768 -> 2048, D=1024 -> 2816).
    """
    hidden = int(2 * mlp_ratio * embed_dims / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


__all__ = ['FFN', 'SwiGLUFFN', 'swiglu_hidden_dims']
