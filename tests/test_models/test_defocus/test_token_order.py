"""The sectioned token order of De-focus's patch rearrangement (the released detection backbone's
``PatchEmbedChangeRes``) and its inverse."""
import pytest
import torch

from mmcausal.models.defocus import TokenOrderError, sectioned_order
from reference.official_defocus import sectioned_index


@pytest.mark.parametrize('grid,section', [((21, 35), (7, 7)), ((9, 15), (3, 5)), ((28, 42), (14, 14)),
                                          ((5, 5), (5, 5)), ((6, 4), (1, 1))])
def test_order_is_a_permutation_with_an_exact_inverse(grid, section):
    order = sectioned_order(grid, section)
    assert sorted(order.tolist()) == list(range(grid[0] * grid[1]))
    tokens = torch.randn(2, grid[0] * grid[1], 3)
    torch.testing.assert_close(tokens[:, order][:, order.argsort()], tokens)


def test_sequence_index_is_the_released_formula():
    height, width, n = 28, 42, 14
    order = sectioned_order((height, width), (n, n))
    slot = order.argsort()  # raster cell -> sequence index
    for r in range(height):
        for c in range(width):
            assert slot[r * width + c] == sectioned_index(r, c, width, n)


def test_each_section_is_contiguous_and_raster_inside():
    order = sectioned_order((9, 15), (3, 5))
    for section in range(9):  # 3 x 3 sections of 3 x 5 patches, in raster order
        cells = order[section * 15:(section + 1) * 15]
        rows, cols = cells // 15, cells % 15
        assert rows.min() == section // 3 * 3 and rows.max() == rows.min() + 2
        assert cols.min() == section % 3 * 5 and cols.max() == cols.min() + 4
        assert (cells.diff() > 0).all()  # raster inside the section


def test_grid_that_is_not_whole_sections_is_rejected():
    with pytest.raises(TokenOrderError, match='pad the image'):
        sectioned_order((10, 14), (14, 14))
