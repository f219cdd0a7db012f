"""De-focus's RoPE with learnable frequencies over a 1-D token sequence (paper Sec. 3.2) and the released
De-focus Mamba's "unpaired" rotation (one angle per channel)."""
from typing import Tuple, Union

import torch
from torch import Tensor, nn

from mmcausal.utils.validation import check_choice
from ...layers.rope import RopeConfigError, apply_rotary, rotate_pairs_real


def defocus_frequencies(count: int) -> Tensor:
    """De-focus's initial learnable-RoPE frequencies ``f_n = (100^(-n/K) - 100^-1) / (1 - 100^-1)``, ``n = 1..K``
    (notes B1): from ~0.747 down to exactly 0 (the last dim is a pure low-pass channel)."""
    steps = torch.arange(1, count + 1, dtype=torch.float64) / count
    return ((100. ** -steps - 0.01) / 0.99).float()


def apply_unpaired_rotary(x: Tensor, angles: Tensor) -> Tensor:
    """The released De-focus Mamba's "rotate every two" with one angle per *channel*, not per pair.

    ``out[2j] = x[2j] cos a_2j - x[2j+1] sin a_2j`` and ``out[2j+1] = x[2j+1] cos a_2j+1 + x[2j] sin a_2j+1``:
    the two members of a pair turn by different angles, so it is not a rotation and ``<R_t c, R_s b>`` is not a
    function of ``t - s`` (a quirk the released weights learnt). With ``a_2j = a_2j+1`` it is
    :func:`apply_rotary`.

    Args:
        x: ``(..., L, K)``.
        angles: ``(L, K)`` fp32.

    Returns:
        Tensor like ``x`` (computed in at least fp32).
    """
    first, second = angles.unflatten(-1, (-1, 2)).unbind(-1)
    return rotate_pairs_real(x, first, second)


ROPE_PAIRINGS = ('unpaired', 'paired')


class LearnableRoPE(nn.Module):
    """RoPE with learnable frequencies over a 1-D token sequence (De-focus, paper Sec. 3.2: with the learnable
    decay it makes a learnable band-pass filter). Positions are the sequence indices ``t / position_scale``.

    Args:
        num_dims: channels rotated (``K``, even).
        pairing: ``'unpaired'`` (the released De-focus Mamba: ``K`` frequencies, one per channel,
            :func:`apply_unpaired_rotary`; needed for its weights) or ``'paired'`` (a true rotation, ``K / 2``
            frequencies, :func:`apply_rotary`). Initial frequencies: :func:`defocus_frequencies` of their count.
        legacy_bf16: in training, round positions and angles to bfloat16 as the official bf16-autocast training
            did (angles >= 128 rad become whole radians); its evaluation, and ours otherwise, is fp32.

    Attributes:
        freq: the learnable frequencies (the official key ``mixer.freq`` in ``'unpaired'``).
    """

    def __init__(self, num_dims: int, pairing: str = 'unpaired', legacy_bf16: bool = False) -> None:
        super().__init__()
        if num_dims % 2:
            raise RopeConfigError(f'RoPE needs an even number of channels, got {num_dims}.')
        self.pairing = check_choice('rope pairing', pairing, ROPE_PAIRINGS, RopeConfigError)
        self.legacy_bf16 = legacy_bf16
        self.freq = nn.Parameter(defocus_frequencies(num_dims if pairing == 'unpaired' else num_dims // 2))

    def angles(self, length: int, position_scale: float = 1.) -> Tensor:
        """``(length, len(freq))`` angles ``(t / position_scale) * f``, in fp32 (fp64 for an fp64 module)."""
        if self.legacy_bf16 and self.training:
            positions = torch.arange(length, device=self.freq.device, dtype=torch.bfloat16) / position_scale
            return (positions[:, None] * self.freq.bfloat16()).float()
        dtype = torch.promote_types(self.freq.dtype, torch.float32)
        positions = torch.arange(length, device=self.freq.device, dtype=dtype) / position_scale
        return positions[:, None] * self.freq.to(dtype)

    def forward(self, *xs: Tensor, position_scale: float = 1.) -> Union[Tensor, Tuple[Tensor, ...]]:
        """Rotate each ``x`` ``(..., L, K)`` (same ``L``) by the angles of positions ``0..L-1``, computed once."""
        angles = self.angles(xs[0].shape[-2], position_scale)
        rotate = apply_unpaired_rotary if self.pairing == 'unpaired' else apply_rotary
        rotated = tuple(rotate(x, angles) for x in xs)
        return rotated[0] if len(rotated) == 1 else rotated

    def extra_repr(self) -> str:
        return f'pairing={self.pairing!r}, legacy_bf16={self.legacy_bf16}'
