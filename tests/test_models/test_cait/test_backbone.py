"""CaiT backbone: exact parameter counts of the official registrations (deit ``cait_models.py``), the released models'
norms / LayerScale / drop path, the two attention paths, the class stage that never changes the patch tokens, and dense
use (resized position table, named feature norm, loading a table trained at another resolution)."""
import pytest
import torch
from torch import nn

from mmcausal.models.cait import CaiT
from mmcausal.utils.errors import UserInputError

pytestmark = pytest.mark.usefixtures('single_thread')

#: the official registrations (``cait_models.py``, 1000 classes): arch -> {resolution: parameters}
PARAMETERS = {
    'xxs24': {224: 11_956_264, 384: 12_029_224},
    'xxs36': {224: 17_299_720, 384: 17_372_680},
    'xs24': {224: 26_560_648, 384: 26_670_088},
    's24': {224: 46_916_200, 384: 47_062_120},
    's36': {224: 68_220_712, 384: 68_366_632},
    'm36': {224: 270_929_512, 384: 271_221_352},
    'm48': {224: 356_008_936, 448: 356_460_520},
    'xs36': {224: 38_557_432},  # paper-only sizes (Table 3)
    's48': {224: 89_525_224},
    'm24': {224: 185_850_088},
}
#: the official code's (and timm's) init; XXS-36's paper value (1e-6) differs
LAYER_SCALE = {'xxs24': 1e-5, 'xxs36': 1e-5, 'xs24': 1e-5, 's24': 1e-5, 's36': 1e-6, 'm36': 1e-6, 'm48': 1e-6}
TINY = dict(arch=dict(embed_dims=32, num_layers=3, num_heads=4), img_size=32, patch_size=8)


@pytest.mark.parametrize('arch,resolution', [(a, r) for a, sizes in PARAMETERS.items() for r in sizes])
def test_parameter_counts_are_the_official_ones(arch, resolution):
    with torch.device('meta'):
        model = CaiT(arch, img_size=resolution)
    embed_dims = model.embed_dims
    head = embed_dims * 1000 + 1000  # the official Linear(C, 1000) classifier
    assert sum(p.numel() for p in model.parameters()) + head == PARAMETERS[arch][resolution]


@pytest.mark.parametrize('arch', sorted(LAYER_SCALE))
def test_released_settings_norms_layer_scale_and_drop_path(arch):
    with torch.device('meta'):
        model = CaiT(arch, drop_path_rate=.3)
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 2 * model.num_layers + 2 * 2 + 1
    assert all(norm.eps == 1e-6 for norm in norms)  # 1e-5 moves logits by only ~4e-5: asserted, not measured
    blocks = [*model.layers, *model.class_attn.layers]
    assert {block.ls1.weight.shape[0] for block in blocks} == {model.embed_dims}
    # uniform stochastic depth over the SA blocks (Sec. 4.1.1), none in the class-attention blocks
    assert [block.drop_path_rate for block in model.layers] == [.3] * model.num_layers
    assert [block.drop_path_rate for block in model.class_attn.layers] == [0., 0.]
    assert all(block.attn.qkv.bias is not None for block in model.layers)


@pytest.mark.parametrize('arch', sorted(LAYER_SCALE))
def test_layer_scale_starts_at_the_official_value(arch):
    model = CaiT(dict(CaiT.arch_zoo[(arch, )], num_layers=1), img_size=32)  # the arch's init, one block
    for block in (model.layers[0], *model.class_attn.layers):
        for scale in (block.ls1.weight, block.ls2.weight):
            torch.testing.assert_close(scale, torch.full_like(scale, LAYER_SCALE[arch]), rtol=0, atol=0)


def _tiny(**kwargs) -> CaiT:
    torch.manual_seed(0)
    model = CaiT(**{**TINY, **kwargs})
    model.init_weights()
    with torch.no_grad():  # large LayerScale and head mixing so every branch matters
        for name, param in model.named_parameters():
            if name.endswith(('ls1.weight', 'ls2.weight')) or '.proj_' in name:
                param.normal_(std=.5)
    return model.eval()


def test_sdpa_and_explicit_paths_give_the_same_class_feature_and_gradients():
    results = []
    for impl in ('sdpa', 'explicit'):
        model = _tiny(attn_impl=impl).double()
        x = torch.randn(2, 3, 40, 24, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        out, = model(x)
        out.square().sum().backward()
        results.append((out, {n: p.grad for n, p in model.named_parameters()}))
    (fast, fast_grads), (ref, ref_grads) = results
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    for name, grad in ref_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, rtol=1e-8, atol=1e-10, msg=name)


def test_class_stage_reads_the_last_block_and_leaves_the_patch_tokens_alone():
    model = _tiny()
    dense = _tiny(out_type='raw')
    dense.load_state_dict(model.state_dict(), strict=False)
    x = torch.randn(2, 3, 32, 32)
    seen = []
    model.class_attn.register_forward_pre_hook(lambda _, args: seen.append(args[0].clone()))
    cls, = model(x)
    patches, = dense(x)
    torch.testing.assert_close(seen[0], patches, rtol=0, atol=0)  # the CA stage read the SA stage's output ...
    torch.testing.assert_close(model.norm(model.class_attn(patches)), cls, rtol=0, atol=0)  # ... and only that


def test_dense_features_follow_the_grid_and_the_named_norm():
    raw = _tiny(out_type='featmap', out_indices=(0, 2))
    assert not hasattr(raw, 'class_attn') and isinstance(raw.norm, nn.Identity)
    normed = _tiny(out_type='featmap', out_indices=(0, 2), feature_norm='final')
    with torch.no_grad():
        normed.norm.weight.normal_()
    normed.load_state_dict(raw.state_dict(), strict=False)
    x = torch.randn(1, 3, 50, 30)  # 7 x 4 grid: the 4 x 4 table is resized
    plain, normalised = raw(x), normed(x)
    assert [tuple(f.shape) for f in plain] == [(1, 32, 7, 4)] * 2
    for p, n in zip(plain, normalised):
        expected = normed.norm(p.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(p.shape)
        torch.testing.assert_close(n, expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(UserInputError, match='feature_norm'):
        CaiT(**TINY, feature_norm='ln')


def test_a_table_trained_at_another_resolution_is_resized_when_loaded():
    small = _tiny(img_size=32)  # 4 x 4 grid, no class row
    large = _tiny(img_size=48)  # 6 x 6
    large.load_state_dict(small.state_dict())
    expected = nn.functional.interpolate(small.pos_embed.reshape(1, 4, 4, 32).permute(0, 3, 1, 2), size=(6, 6),
                                         mode='bicubic', align_corners=False).flatten(2).transpose(1, 2)
    torch.testing.assert_close(large.pos_embed.detach(), expected, rtol=1e-6, atol=1e-6)
    x = torch.randn(1, 3, 48, 48)
    torch.testing.assert_close(large(x)[0], small(x)[0], rtol=1e-5, atol=1e-5)  # the same table at the same grid
