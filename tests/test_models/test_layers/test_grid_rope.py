"""GridRoPE: the RoPE position policy (1D sequence index, 2D / AS2D grids, GSA key grids).

The 2D / AS2DRoPE tables are checked against independent formulas in test_rope_2d.py and the VisionLLaMA
backbone tests; here the oracles are the formulas of the official code (VisionLLaMA ``deit/my_models.py``, iLLaMA
``models/illama.py``), written out without mmcausal code.
"""
import pytest
import torch

from mmcausal.models.layers import GridRoPE, RopeConfigError
from mmcausal.models.vision_llama.twins_attention import subsampled_key_angles


def _angles_2d(positions, head_dim, theta=10000.):
    """VisionLLaMA's 2-D RoPE: pair ``2k`` turns by ``x w_k``, pair ``2k+1`` by ``y w_k``, ``w_k = theta^(-4k/d)``."""
    w = torch.tensor([theta ** (-4 * k / head_dim) for k in range(head_dim // 4)])
    y, x = positions[:, :1], positions[:, 1:]
    return torch.stack((x * w, y * w), dim=-1).flatten(-2)


def test_1d_positions_put_a_trailing_class_token_at_index_n():
    """iLLaMA: ``[patch_0 .. patch_{N-1}, cls]`` at positions ``0..N``; a leading cls is index 0."""
    rope = GridRoPE(8, mode='1d')
    freqs = torch.tensor([10000. ** (-2 * i / 8) for i in range(4)])
    last = rope.sequence_angles((2, 3), 'last')
    torch.testing.assert_close(last, torch.arange(7.)[:, None] * freqs)
    first = rope.sequence_angles((2, 3), 'first')
    torch.testing.assert_close(first, torch.arange(7.)[:, None] * freqs)
    assert rope.cls_token_position((2, 3), 'last').item() == 6 and rope.cls_token_position((2, 3), 'first') == 0


def test_fixed_ladders_are_not_checkpoint_keys():
    assert list(GridRoPE(8, mode='1d').state_dict()) == []


def test_windows_and_sub_sampling_refuse_1d_positions():
    with pytest.raises(RopeConfigError, match='2D positions'):
        GridRoPE(16, mode='1d', requires_2d=True)
    rope = GridRoPE(16, mode='2d', requires_2d=True)
    with pytest.raises(RopeConfigError, match='2D positions'):
        rope.mode = '1d'
    with pytest.raises(RopeConfigError, match='divisible by 4'):
        GridRoPE(6, mode='2d')


@pytest.mark.parametrize('grid,sr', [((8, 8), 2), ((8, 12), 4), ((6, 6), 1)])
def test_fixed_gsa_keys_sit_at_the_centres_of_their_cells(grid, sr):
    """Key ``(i, j)`` of the ``(H/sr, W/sr)`` grid averages the positions of its ``sr x sr`` cell."""
    rope = GridRoPE(16, mode='2d')
    key_grid = (grid[0] // sr, grid[1] // sr)
    cells = torch.tensor([[float(r), float(c)] for r in range(grid[0]) for c in range(grid[1])])
    centres = cells.view(key_grid[0], sr, key_grid[1], sr, 2).mean(dim=(1, 3)).reshape(-1, 2)
    angles = subsampled_key_angles(rope, grid, sr, key_grid, 'fixed')
    torch.testing.assert_close(angles, _angles_2d(centres, 16))


@pytest.mark.parametrize('grid,sr', [((8, 8), 2), ((8, 8), 4), ((4, 4), 1)])
def test_official_gsa_keys_reproduce_the_released_formula(grid, sr):
    """``precompute_freqs_cis_2d_general`` of the official GSA: ``x_k(m) = (1 - 1/sr) + sr (m mod W)``,
    ``y_k(m) = (1 - 1/sr) + sr floor(m / W)`` with the query width ``W`` and ``M = floor(H W / sr^2)``; correct only
    for ``sr = 1``."""
    rope = GridRoPE(16, mode='2d')
    height, width = grid
    num_keys = height * width // sr // sr
    offset = 1 - 1 / sr
    positions = torch.tensor([[offset + sr * (m // width), offset + sr * (m % width)] for m in range(num_keys)])
    angles = subsampled_key_angles(rope, grid, sr, (height // sr, width // sr), 'official')
    torch.testing.assert_close(angles, _angles_2d(positions, 16))
    if sr == 1:
        torch.testing.assert_close(angles, subsampled_key_angles(rope, grid, 1, grid, 'fixed'))
    with pytest.raises(RopeConfigError, match='gsa_key_pos'):
        subsampled_key_angles(rope, grid, sr, grid, 'centred')


def test_gsa_keys_are_auto_scaled_like_the_queries():
    """AS2DRoPE scales keys and queries by the same ``s = B / H`` (the official ``GSAttention`` with ``auto_scale``)."""
    rope = GridRoPE(16, mode='as2d', anchor=4)
    plain = GridRoPE(16, mode='2d')
    centres = torch.tensor([[0.5 + 2 * i, 0.5 + 2 * j] for i in range(4) for j in range(4)])
    torch.testing.assert_close(subsampled_key_angles(rope, (8, 8), 2, (4, 4)), _angles_2d(centres * 0.5, 16))
    assert not torch.allclose(subsampled_key_angles(rope, (8, 8), 2, (4, 4)),
                              subsampled_key_angles(plain, (8, 8), 2, (4, 4)))
