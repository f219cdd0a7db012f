"""Learnable position tables resized to any grid, class row first or last."""
import torch

from mmcausal.models.layers import (
    resize_pos_embed,
)

torch.manual_seed(0)


def test_resize_pos_embed_keeps_cls_row_last_and_handles_non_square():
    table = torch.randn(1, 4 * 4 + 1, 8)
    resized = resize_pos_embed(table, (4, 4), (3, 6), cls_position='last')
    assert resized.shape == (1, 3 * 6 + 1, 8)
    torch.testing.assert_close(resized[:, -1], table[:, -1])
    same = resize_pos_embed(table, (4, 4), (4, 4), cls_position='last')
    torch.testing.assert_close(same, table)
