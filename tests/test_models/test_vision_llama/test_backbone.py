"""VisionLLaMA backbone: AS2DRoPE through the backbone, windowed blocks, layouts, outputs, init."""
import copy
import math
import warnings
from functools import partial

import pytest
import torch

from mmcausal.models.layers import (
    GridRoPE,
    SelfAttention,
    SwiGLUFFN,
    TransformerBlock,
    auto_scale,
    grid_positions,
)
from mmcausal.models.vision_llama import VisionLLaMA
from mmcausal.utils.errors import UserInputError

TINY = dict(embed_dims=32, num_layers=3, num_heads=2)


def tiny(**kwargs) -> VisionLLaMA:
    torch.manual_seed(0)
    kwargs.setdefault('arch', TINY)
    kwargs.setdefault('img_size', 64)
    kwargs.setdefault('patch_size', 8)
    kwargs.setdefault('rope_anchor', 8)  # the tiny models "pre-train" at 64 px / patch 8
    model = VisionLLaMA(**kwargs)
    model.init_weights()
    return model.eval()


def sequence_angles(model, grid):
    return model.rope.sequence_angles(grid, model.cls_position)


def test_rope_needs_head_dim_divisible_by_four():
    with pytest.raises(ValueError, match='divisible by 4'):
        GridRoPE(6, mode='2d')
    with pytest.raises(ValueError, match='divisible by 4'):
        VisionLLaMA(arch=dict(embed_dims=36, num_layers=1, num_heads=6))


# ----------------------------------------------------------------------------------- AS2DRoPE
def test_as2d_rope_equals_2d_rope_at_the_anchor():
    as2d, plain = tiny(rope_mode='as2d'), tiny(rope_mode='2d')
    assert as2d.rope_anchor == (8, 8)
    torch.testing.assert_close(sequence_angles(as2d, (8, 8)), sequence_angles(plain, (8, 8)), rtol=0, atol=0)
    images = torch.randn(2, 3, 64, 64)
    torch.testing.assert_close(as2d(images)[0], plain(images)[0], rtol=0, atol=0)


def test_as2d_rope_maps_a_larger_grid_onto_the_anchor_range():
    model = tiny(rope_mode='as2d', rope_anchor=8, as2d_scaling='per_axis', with_cls_token=False,
                 out_type='avg_featmap')
    positions = model.rope.patch_positions((16, 32))
    # per_axis: (i * 8 / 16, j * 8 / 32): both axes span [0, 8) like the anchor grid
    torch.testing.assert_close(positions, grid_positions((16, 32), (0.5, 0.25)))
    assert positions[:, 0].max() == 7.5 and positions[:, 1].max() == 7.75 and positions.min() == 0
    assert auto_scale((16, 32), (8, 8), 'per_axis') == (0.5, 0.25)
    # isotropic (paper Eq. 4, official code): one scale 8 / 16 from the height, the aspect ratio is kept
    model.as2d_scaling = 'isotropic'
    assert model.rope.patch_positions((16, 32))[:, 1].max() == 15.5
    assert auto_scale((16, 32), (8, 8), 'isotropic') == (0.5, 0.5)
    plain = tiny(rope_mode='2d', with_cls_token=False, out_type='avg_featmap')
    assert plain.rope.patch_positions((16, 32))[:, 1].max() == 31  # 2D RoPE extrapolates instead
    images = torch.randn(1, 3, 128, 256)
    assert not torch.allclose(model(images)[0], plain(images)[0])


def test_rope_tables_follow_the_aspect_ratio_with_the_same_token_count():
    """Detection changes H x W every iteration: (4, 16) and (16, 4) have the same N but other positions."""
    model = tiny(rope_mode='as2d', with_cls_token=False, out_type='featmap')
    wide, tall = sequence_angles(model, (4, 16)), sequence_angles(model, (16, 4))
    assert wide.shape == tall.shape and not torch.allclose(wide, tall)
    torch.testing.assert_close(wide, model.rope.angles(grid_positions((4, 16), (8 / 4, 8 / 16))))  # per axis
    # forward on one shape, then the transposed one: same result as a model that never saw the first
    fresh = copy.deepcopy(model)
    model(torch.randn(1, 3, 32, 128))
    tall_images = torch.randn(1, 3, 128, 32)
    torch.testing.assert_close(model(tall_images)[0], fresh(tall_images)[0], rtol=0, atol=0)


def test_cls_token_rotation_modes():
    identity = tiny(cls_rope='identity')
    trunc = tiny(cls_rope='legacy_trunc', rope_mode='2d')
    floor = tiny(cls_rope='legacy_floor', rope_mode='2d')
    assert identity.rope.cls_token_position((8, 8), 'first').tolist() == [[0., 0.]]
    assert trunc.rope.cls_token_position((8, 8), 'first').tolist() == [[0., 7.]]  # flat index -1 -> (row 0, col W-1)
    assert floor.rope.cls_token_position((8, 8), 'first').tolist() == [[-1., 7.]]
    assert tiny(layout='official_deit').rope.cls_rope == 'legacy_trunc'
    with pytest.raises(ValueError, match='cls_rope'):
        tiny(cls_rope='middle')


def test_backbone_windows_use_local_positions_and_global_blocks_the_full_grid():
    kwargs = dict(with_cls_token=False, out_type='featmap', rope_mode='2d')
    windowed = tiny(window_size=8, global_blocks=[1], **kwargs)
    plain = tiny(**kwargs)
    assert [getattr(layer.attn, 'window_size', 0) for layer in windowed.layers] == [8, 0, 8]
    images = torch.randn(2, 3, 64, 48)  # 8 x 6 grid: one padded window
    torch.testing.assert_close(windowed(images)[0], plain(images)[0], rtol=1e-5, atol=1e-5)
    smaller = tiny(window_size=4, global_blocks=[1], **kwargs)
    assert not torch.allclose(smaller(images)[0], plain(images)[0], atol=1e-4)


def test_windows_reject_a_class_token_and_bad_blocks():
    with pytest.raises(ValueError, match='with_cls_token=False'):
        tiny(window_size=4)
    with pytest.raises(ValueError, match='global_blocks'):
        tiny(window_size=4, with_cls_token=False, out_type='featmap', global_blocks=[5])


# ----------------------------------------------------------------------------------- layouts
def expected_parameters(dims: int, layers: int, hidden: int, ffn_bias: bool, patch: int = 16) -> int:
    """Closed form: patch conv + per block (2 LN, qkv, proj, SwiGLU w12/w3) + final LN + cls token."""
    block = 4 * dims + 3 * dims * dims + 3 * dims + dims * dims + dims + 3 * hidden * dims
    block += (2 * hidden + dims) if ffn_bias else 0
    return 3 * patch * patch * dims + dims + layers * block + 2 * dims + dims


@pytest.mark.parametrize('arch,layout,dims,layers,hidden,approx_millions', [
    ('small', 'clean', 384, 12, 1024, 22.0), ('base', 'clean', 768, 12, 2048, 86.4),
    ('large', 'clean', 1024, 24, 2816, 310), ('base', 'official_mae', 768, 12, 8192, 256),
    ('large', 'official_mae', 1024, 24, 11008, 914)])
def test_parameter_counts(arch, layout, dims, layers, hidden, approx_millions):
    """Exact closed form; within 0.5 % of the official models' counts (S/B/L incl. a 1000-way head)."""
    with torch.device('meta'):
        model = VisionLLaMA(arch, layout=layout)
    count = sum(p.numel() for p in model.parameters())
    assert count == expected_parameters(dims, layers, hidden, ffn_bias=layout == 'official_mae')
    head = 1000 * dims + 1000 if layout == 'clean' else 0
    assert abs(count + head - approx_millions * 1e6) < 0.005 * approx_millions * 1e6


def test_official_mae_layout_switches():
    with torch.device('meta'):
        mae = VisionLLaMA('base', layout='official_mae', drop_path_rate=0.1)
        clean = VisionLLaMA('base', drop_path_rate=0.1)
    assert mae.layers[0].ffn.w12.weight.shape == (2 * 8192, 768) and mae.layers[0].ffn.w12.bias is not None
    assert mae.layers[0].ffn.w3.weight.shape == (768, 8192)
    assert clean.layers[0].ffn.w12.weight.shape == (2 * 2048, 768) and clean.layers[0].ffn.w12.bias is None
    assert not mae.layers[-1].ffn_drop_path and clean.layers[-1].ffn_drop_path
    assert isinstance(mae.layers[0].ls1, torch.nn.Identity)
    with torch.device('meta'):
        deit = VisionLLaMA('base', layout='official_deit')
        override = VisionLLaMA('base', layout='official_mae', ffn_bias=False)
    assert deit.layers[0].ls1.weight.shape == (768, )
    assert override.layers[0].ffn.w12.bias is None
    with pytest.raises(ValueError, match='layout'):
        VisionLLaMA('base', layout='mae')


def test_ffn_branch_drop_path_switch():
    x = torch.randn(4, 10, 32)
    torch.manual_seed(0)
    block = TransformerBlock(32, partial(SelfAttention, num_heads=2, mask_mode='bidirectional'),
                             partial(SwiGLUFFN, feedforward_channels=64, add_identity=False), drop_path_rate=0.99,
                             ffn_drop_path=False)
    block.train()
    # with drop path on the attention branch only, the FFN branch always contributes
    with torch.no_grad():
        block.attn.proj.weight.zero_()
        block.attn.proj.bias.zero_()
        expected = x + block.ffn(block.norm2(x))
    torch.testing.assert_close(block(x), expected)


def test_layer_depth_for_layer_decay():
    model = tiny(with_cls_token=True)
    depth = {name: model.get_layer_depth(name)[0] for name, _ in model.named_parameters()}
    assert depth['cls_token'] == 0 and depth['patch_embed.projection.weight'] == 0
    assert depth['layers.0.attn.qkv.weight'] == 1 and depth['layers.2.ffn.w3.weight'] == 3
    assert depth['norm.weight'] == 4 and model.get_layer_depth('norm.weight')[1] == 5


def test_gradient_checkpointing_gives_the_same_gradients():
    images = torch.randn(2, 3, 64, 64)
    grads = []
    for with_cp in (False, True):
        model = tiny(with_cp=with_cp).train()
        model(images)[0].square().sum().backward()
        grads.append(model.layers[0].attn.qkv.weight.grad)
    torch.testing.assert_close(grads[0], grads[1])


def test_frozen_stages_and_outputs():
    model = tiny(with_cls_token=False, out_type='featmap', frozen_stages=2, out_indices=(0, -1))
    model.train()
    assert not model.patch_embed.projection.weight.requires_grad
    assert not model.layers[1].ffn.w3.weight.requires_grad and model.layers[2].ffn.w3.weight.requires_grad
    outs = model(torch.randn(1, 3, 72, 40))  # padded to 9 x 5 patches
    assert [tuple(o.shape) for o in outs] == [(1, 32, 9, 5)] * 2
    avg = tiny(with_cls_token=False, out_type='avg_featmap', final_norm=False)
    assert avg(torch.randn(1, 3, 64, 64))[0].shape == (1, 32) and hasattr(avg.pool_norm, 'weight')
    with pytest.raises(ValueError, match='cls_token'):
        tiny(with_cls_token=False, out_type='cls_token')
    with pytest.raises(ValueError, match='Unknown arch'):
        VisionLLaMA('huge')


def test_rope_1d_mode_uses_sequence_indices():
    model = tiny(rope_mode='1d')
    angles = sequence_angles(model, (2, 3))
    expected = torch.arange(7.).unsqueeze(-1) * model.rope.freqs_1d
    torch.testing.assert_close(angles, expected)
    assert math.isclose(float(model.rope.freqs_1d[1]), 10000 ** (-2 / 16), rel_tol=1e-6)


def _checkpoint_with_known_class_token(tmp_path):
    """A backbone and its checkpoint, whose class token is 0.5 everywhere (random init never gives that)."""
    source = tiny()
    with torch.no_grad():
        source.cls_token.fill_(0.5)
    path = tmp_path / 'backbone.pth'
    torch.save({'state_dict': source.state_dict()}, path)
    return source, path


def test_pretrained_init_in_a_list_keeps_the_loaded_class_token(tmp_path):
    source, path = _checkpoint_with_known_class_token(tmp_path)
    model = VisionLLaMA(TINY, img_size=64, patch_size=8, init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02), dict(type='Pretrained', checkpoint=str(path))])
    model.init_weights()
    assert (model.cls_token == 0.5).all()
    torch.testing.assert_close(model.layers[0].attn.qkv.weight, source.layers[0].attn.qkv.weight)


def test_rope_settings_are_validated_when_switched_at_run_time():
    model = tiny(with_cls_token=False, out_type='avg_featmap', window_size=4)
    with pytest.raises(ValueError, match='rope_mode'):
        model.rope_mode = '3d'
    with pytest.raises(ValueError, match='2D positions'):
        model.rope_mode = '1d'
    model.rope_anchor = 16
    assert model.rope_anchor == (16, 16)
    with pytest.raises(ValueError, match='positive'):
        model.rope_anchor = (0, 4)


def _as2d_angles_formula(grid, anchor, head_dim, scaling, theta=10000.):
    """Independent AS2DRoPE angle table (no mmcausal code). Positions, VisionLLaMA Eq. 4 with anchor B:

    * isotropic (paper Eq. 4 ``R_{i B/H, j B/H}``, official ``s = 224 / H_px``): ``(i B_h / H, j B_h / H)``;
    * per_axis: ``(i B_h / H, j B_w / W)``.

    Angles (the official ``precompute_freqs_cis_2d``): ``w_k = theta^(-4k/d)``; pair ``2k`` turns by ``x w_k``, pair
    ``2k + 1`` by ``y w_k``.
    """
    height, width = grid
    scale_y = anchor[0] / height
    scale_x = anchor[0] / height if scaling == 'isotropic' else anchor[1] / width
    table = []
    for n in range(height * width):
        y, x = (n // width) * scale_y, (n % width) * scale_x
        row = []
        for k in range(head_dim // 4):
            w = theta ** (-4 * k / head_dim)
            row += [x * w, y * w]
        table.append(row)
    return torch.tensor(table, dtype=torch.float32)


@pytest.mark.parametrize('scaling', ['isotropic', 'per_axis'])
@pytest.mark.parametrize('grid', [(6, 10), (12, 4)])
def test_as2d_scalings_match_the_formula_off_the_anchor(scaling, grid):
    model = tiny(rope_mode='as2d', rope_anchor=(8, 8), as2d_scaling=scaling, with_cls_token=False,
                 out_type='avg_featmap')
    expected = _as2d_angles_formula(grid, (8, 8), 16, scaling)
    torch.testing.assert_close(sequence_angles(model, grid), expected, rtol=1e-6, atol=1e-5)


def test_as2d_scalings_differ_only_off_a_square_grid():
    iso = tiny(rope_mode='as2d', as2d_scaling='isotropic', with_cls_token=False, out_type='avg_featmap')
    per_axis = tiny(rope_mode='as2d', as2d_scaling='per_axis', with_cls_token=False, out_type='avg_featmap')
    torch.testing.assert_close(sequence_angles(iso, (12, 12)), sequence_angles(per_axis, (12, 12)), rtol=0, atol=0)
    assert not torch.allclose(sequence_angles(iso, (6, 12)), sequence_angles(per_axis, (6, 12)), atol=1e-3)


def test_unknown_as2d_scaling_is_a_clear_error():
    with pytest.raises(UserInputError, match="Unknown as2d_scaling 'anisotropic'.*isotropic.*per_axis"):
        tiny(as2d_scaling='anisotropic')
    model = tiny()
    with pytest.raises(ValueError, match='as2d_scaling'):
        model.as2d_scaling = 'both'
    assert model.as2d_scaling == 'per_axis'


def test_default_anchor_is_the_224_px_pretraining_grid():
    """The anchor is the pre-training grid (14 at 224 px / patch 16), never the img_size grid."""
    dense = VisionLLaMA(TINY, img_size=512, patch_size=16, with_cls_token=False, out_type='featmap')
    assert dense.rope_anchor == (14, 14) and dense.patch_resolution == (32, 32)
    assert VisionLLaMA(TINY, img_size=64, patch_size=8).rope_anchor == (28, 28)
    assert VisionLLaMA(TINY, img_size=64, patch_size=8, rope_anchor=8).rope_anchor == (8, 8)


def test_dense_as2d_anchored_at_its_input_grid_warns():
    kwargs = dict(arch=TINY, img_size=512, patch_size=16, with_cls_token=False, out_type='featmap')
    with pytest.warns(UserWarning, match=r'rope_anchor=\(32, 32\) equal to the input grid.*14'):
        VisionLLaMA(rope_mode='as2d', rope_anchor=32, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        VisionLLaMA(rope_mode='as2d', **kwargs)  # default anchor 14
        VisionLLaMA(rope_mode='2d', rope_anchor=32, **kwargs)  # AS2DRoPE not used
        VisionLLaMA(TINY, img_size=512, patch_size=16, rope_anchor=32)  # classifier (cls_token output)


def test_second_init_weights_keeps_the_pretrained_stem(tmp_path):
    source, path = _checkpoint_with_known_class_token(tmp_path)
    model = VisionLLaMA(TINY, img_size=64, patch_size=8, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    model.init_weights()
    model.init_weights()  # e.g. a wrapper or a script that initialises again
    assert (model.cls_token == 0.5).all()
    torch.testing.assert_close(model.layers[0].attn.qkv.weight, source.layers[0].attn.qkv.weight)


def saved_for_backward_bytes(model, images) -> int:
    """Bytes of the distinct non-parameter storages autograd keeps for the backward of ``model(images)``."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(images)
    return sum(saved.values())


def test_vitdet_windows_keep_no_more_for_backward_than_global_attention():
    """ViTDet-style backbone (MAE layout, windowed blocks with global blocks 1 and 3) on a 9 x 9 grid that 7 x 7
    windows do not divide: its backward keeps no more than the same backbone with global attention in every block
    (padded, masked windows would keep 81 -> 196 tokens per windowed block, 1.2x at this size)."""
    vitdet = dict(arch=dict(embed_dims=64, num_layers=4, num_heads=4), img_size=72, patch_size=8,
                  layout='official_mae', with_cls_token=False, rope_mode='2d', global_blocks=[1, 3],
                  out_indices=[3], out_type='featmap', final_norm=False)
    images = torch.randn(1, 3, 72, 72)
    windowed = saved_for_backward_bytes(tiny(window_size=7, **vitdet).train(), images)
    global_attention = saved_for_backward_bytes(tiny(window_size=0, **vitdet).train(), images)
    assert windowed <= 1.01 * global_attention, (windowed, global_attention)
