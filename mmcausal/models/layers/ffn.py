"""Feed-forward layers: SwiGLU (Shazeer 2020) with the LLaMA width rule.

The module itself is mmpretrain's :class:`~mmpretrain.models.utils.SwiGLUFFN`
(``w3(silu(x W1) * (x W2))`` with ``W1, W2`` fused into ``w12``); this file only adds the width rule.
"""
from mmpretrain.models.utils import SwiGLUFFN


def swiglu_hidden_dims(embed_dims: int, mlp_ratio: float = 4., multiple_of: int = 256) -> int:
    """LLaMA/iLLaMA SwiGLU width: ``int(2/3 * mlp_ratio * D)`` rounded up to a multiple of ``multiple_of``.

    Keeps the parameter count of a ``mlp_ratio`` GELU MLP (e.g. D=192 -> 512, D=768 -> 2048, D=1024 -> 2816).
    """
    hidden = int(2 * mlp_ratio * embed_dims / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


__all__ = ['SwiGLUFFN', 'swiglu_hidden_dims']
