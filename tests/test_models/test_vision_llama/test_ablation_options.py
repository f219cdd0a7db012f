"""VisionLLaMA's Table 7 switches: partial and per-head RoPE, GELU FFN, the drop-path schedule of the deit layout.
(Equality with the official deit model for each switch: tests/test_converters/test_vision_llama_deit.py.)"""
import pytest
import torch

from mmcausal.models.layers import GridRoPE, grid_positions
from mmcausal.models.vision_llama import VisionLLaMA
from mmcausal.models.vision_llama.rope_variants import PartialGridRoPE


def _tiny(**kwargs) -> VisionLLaMA:
    torch.manual_seed(0)
    model = VisionLLaMA(arch=kwargs.pop('arch', dict(embed_dims=64, num_layers=2, num_heads=2)), img_size=32,
                        patch_size=8, rope_mode='2d', **kwargs)
    return model.eval()


def test_partial_rope_rotates_the_first_channels_with_a_narrower_ladder():
    positions = grid_positions((3, 5))
    partial = PartialGridRoPE(32, num_heads=2, ratio=0.25, mode='2d').angles(positions)
    narrow = GridRoPE(8, mode='2d').angles(positions)  # a 2D RoPE of the 8 rotated channels
    assert partial.shape == (15, 16)
    torch.testing.assert_close(partial[:, :4], narrow, rtol=0, atol=0)
    assert not partial[:, 4:].any()  # the other 24 channels turn by 0: the identity


def test_per_head_rope_gives_each_head_a_band_of_one_wide_ladder():
    positions = grid_positions((4, 4))
    per_head = PartialGridRoPE(16, num_heads=3, shared=False, mode='2d').angles(positions)
    wide = GridRoPE(48, mode='2d').angles(positions)  # (16, 24): frequencies theta^(-4k/48)
    assert per_head.shape == (3, 16, 8)
    for head in range(3):
        torch.testing.assert_close(per_head[head], wide[:, 8 * head:8 * (head + 1)], rtol=0, atol=0)
    assert not torch.equal(per_head[0], per_head[1])


def test_one_head_per_head_rope_is_the_shared_rope():
    arch = dict(embed_dims=32, num_layers=2, num_heads=1)
    shared, per_head = _tiny(arch=arch), _tiny(arch=arch, rope_shared=False)
    per_head.load_state_dict(shared.state_dict())
    images = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(per_head(images)[0], shared(images)[0])


def test_full_ratio_keeps_the_plain_rope_module():
    assert type(_tiny().rope) is GridRoPE and type(_tiny(rope_ratio=0.5).rope) is PartialGridRoPE


def test_deit_layout_drops_paths_at_one_rate_and_gelu_is_vits_mlp():
    deit = _tiny(layout='official_deit', drop_path_rate=0.2)
    assert [layer.drop_path_rate for layer in deit.layers] == [0.2, 0.2]
    linear = _tiny(layout='official_deit', drop_path_rate=0.2, drop_path_schedule='linear')
    assert [layer.drop_path_rate for layer in linear.layers] == [0.0, 0.2]
    gelu = _tiny(ffn_type='gelu')
    assert gelu.layers[0].ffn.layers[0][0].weight.shape == (256, 64)  # 4 D hidden units with biases
    assert gelu.layers[0].ffn.layers[1].bias.shape == (64, )


@pytest.mark.parametrize('kwargs,message', [
    (dict(rope_ratio=0.1), 'multiple of 4'), (dict(rope_ratio=0.), r'\(0, 1\]'), (dict(ffn_type='relu'), 'ffn_type'),
    (dict(drop_path_schedule='cosine'), 'drop_path_schedule'),
    (dict(rope_shared=False, window_size=2, with_cls_token=False, out_type='featmap'), 'global attention')])
def test_bad_switches_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _tiny(**kwargs)
