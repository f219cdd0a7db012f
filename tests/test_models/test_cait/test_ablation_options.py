"""The CaiT backbone options behind the paper's ablations (Tables 1, 2 and 8), each against an oracle of its own:
DeiT (plain attention, class token at layer 0, no LayerScale) against mmpretrain's ``VisionTransformer``, the late
class token against that model's blocks run by hand, the scalar weighting against LayerScale filled with one value,
ReZero against the identity, the Fixup / T-Fixup rules against their formulas and the drop-path schedules against
theirs."""
import pytest
import torch
from mmpretrain.models import VisionTransformer

from mmcausal.models.cait import CaiT
from mmcausal.utils.errors import UserInputError

pytestmark = pytest.mark.usefixtures('single_thread')

WIDTH, DEPTH, HEADS = 48, 4, 3
ARCH = dict(embed_dims=WIDTH, num_layers=DEPTH, num_heads=HEADS)
DEIT = dict(arch=ARCH, img_size=48, patch_size=16, attn_type='multi_head', residual_scale='none')


def _vit() -> VisionTransformer:
    vit = VisionTransformer(arch=dict(ARCH, feedforward_channels=4 * WIDTH), img_size=48, patch_size=16)
    vit.init_weights()
    with torch.no_grad():  # non-trivial norms and position table
        for name, param in vit.named_parameters():
            if name.endswith(('ln1.weight', 'ln2.weight')):
                param.uniform_(0.5, 1.5)
            elif name.endswith(('ln1.bias', 'ln2.bias')) or name in ('cls_token', 'pos_embed'):
                param.normal_(0, 0.5)
    vit.eval()  # mmpretrain's backbones return None from train()
    return vit


def _deit_from_vit(vit: VisionTransformer, **kwargs) -> CaiT:
    """Our backbone with the ViT's weights: ViT's class-token position row folds into our class token (it is a
    constant added to it), its patch rows are our table (ours has no class row)."""
    ours = CaiT(**DEIT, **kwargs).eval()
    state = {'cls_token': vit.cls_token + vit.pos_embed[:, :1], 'pos_embed': vit.pos_embed[:, 1:],
             'norm.weight': vit.ln1.weight, 'norm.bias': vit.ln1.bias}
    for name, param in vit.named_parameters():
        if name.startswith('layers.'):
            name = name.replace('.ln1.', '.norm1.').replace('.ln2.', '.norm2.')
        elif name.startswith('patch_embed.'):
            pass
        else:
            continue
        state[name] = param
    ours.load_state_dict({k: v.detach() for k, v in state.items()}, strict=True)
    return ours


def test_deit_is_mmpretrains_vision_transformer():
    """cls_insert_layer=0 + plain multi-head attention + no residual weighting = ViT / DeiT (Table 2 row 1, Table 8
    row 1), checked against mmpretrain's implementation."""
    torch.manual_seed(0)
    vit = _vit()
    ours = _deit_from_vit(vit, cls_insert_layer=0, drop_path_schedule='linear')
    images = torch.randn(2, 3, 48, 48)
    with torch.no_grad():
        torch.testing.assert_close(ours(images)[0], vit(images)[0], rtol=1e-5, atol=1e-5)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in vit.parameters()) - WIDTH


@pytest.mark.parametrize('k', [1, 3])
def test_late_class_token_joins_before_block_k(k):
    """Table 2 late insertion: the patches alone through ViT blocks 0..k-1, then [cls; patches] through the rest,
    the final norm on the class token (ViT's own blocks run by hand as the oracle)."""
    torch.manual_seed(1)
    vit = _vit()
    ours = _deit_from_vit(vit, cls_insert_layer=k)
    images = torch.randn(2, 3, 48, 48)
    with torch.no_grad():
        x = vit.patch_embed(images)[0] + vit.pos_embed[:, 1:]
        for i, layer in enumerate(vit.layers):
            if i == k:
                x = torch.cat(((vit.cls_token + vit.pos_embed[:, :1]).expand(2, -1, -1), x), dim=1)
            x = layer(x)
        expected = vit.ln1(x)[:, 0]
        torch.testing.assert_close(ours(images)[0], expected, rtol=1e-5, atol=1e-5)
        # dense outputs after the insertion are the patches only
        dense = CaiT(**DEIT, cls_insert_layer=k, out_type='featmap', out_indices=(0, DEPTH - 1))
        assert [tuple(f.shape) for f in dense(images)] == [(2, WIDTH, 3, 3)] * 2
    assert not hasattr(ours, 'class_attn')


def test_inserted_class_token_is_refused_where_undefined():
    with pytest.raises(UserInputError, match='cls_insert_layer must be in'):
        CaiT(**DEIT, cls_insert_layer=DEPTH)
    with pytest.raises(UserInputError, match='bidirectional'):
        CaiT(**DEIT, cls_insert_layer=0, mask_mode='causal')
    with pytest.raises(UserInputError, match='out_indices'):
        CaiT(**DEIT, cls_insert_layer=2, out_indices=1)


def _pair(**kwargs):
    """Two backbones with the same weights (same seed), built with ``kwargs`` and with LayerScale."""
    base = dict(arch=ARCH, img_size=32, patch_size=16, out_type='raw', drop_path_rate=0.)
    torch.manual_seed(2)
    ours = CaiT(**base, **kwargs)
    ours.init_weights()
    torch.manual_seed(2)
    reference = CaiT(**base, residual_scale='layerscale', layer_scale_init_value=1.)
    reference.init_weights()
    return ours.eval(), reference.eval()


@pytest.mark.parametrize('alpha', [0.37, -1.5])
def test_scalar_weighting_is_layerscale_filled_with_alpha(alpha):
    """Eq. 3 with the pre-norm (Fig. 1(c)): ``x + alpha * SA(LN(x))`` = LayerScale with every lambda = alpha; one
    parameter per branch."""
    ours, reference = _pair(residual_scale='scalar', layer_scale_init_value=alpha)
    with torch.no_grad():
        for block in reference.layers:
            block.ls1.weight.fill_(alpha)
            block.ls2.weight.fill_(alpha)
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(ours(images)[0], reference(images)[0])
    assert {tuple(b.ls1.weight.shape) for b in ours.layers} == {tuple(b.ls2.weight.shape) for b in ours.layers} == {
        (1, )}


def test_no_weighting_is_layerscale_of_one():
    ours, reference = _pair(residual_scale='none')
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(ours(images)[0], reference(images)[0])
    assert not any('ls1' in name or 'ls2' in name for name, _ in ours.named_parameters())


def test_rezero_starts_at_the_identity():
    """ReZero (alpha = 0): every block is the identity at init, so the output is the embedded patches."""
    torch.manual_seed(3)
    model = CaiT(arch=ARCH, img_size=32, patch_size=16, out_type='raw', residual_scale='scalar',
                 layer_scale_init_value=0.).eval()
    model.init_weights()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        patches = model.patch_embed(images)[0] + model.pos_embed
        torch.testing.assert_close(model(images)[0], patches)


def test_residual_scale_applies_to_the_class_attention_blocks_too():
    model = CaiT(arch=ARCH, img_size=32, patch_size=16, residual_scale='scalar', layer_scale_init_value=0.25)
    for block in (*model.layers, *model.class_attn.layers):
        assert block.ls1.weight.tolist() == block.ls2.weight.tolist() == [0.25]


def test_fixup_rules():
    """Fixup (Zhang et al. 2019) with L = 2 x depth branches of m = 2 layers: last layer of each branch 0, first
    layer x L^(-1/(2m-2)); the draw is the default init's (same seed)."""
    kwargs = dict(arch=ARCH, img_size=32, patch_size=16, residual_scale='scalar', layer_scale_init_value=1.)
    torch.manual_seed(4)
    default = CaiT(**kwargs)
    default.init_weights()
    torch.manual_seed(4)
    fixup = CaiT(**kwargs, branch_init='fixup')
    fixup.init_weights()
    scale = (2 * DEPTH) ** -0.5
    for ours, ref in zip(fixup.layers, default.layers):
        torch.testing.assert_close(ours.attn.qkv.weight, ref.attn.qkv.weight * scale, rtol=0, atol=0)
        torch.testing.assert_close(ours.ffn.layers[0][0].weight, ref.ffn.layers[0][0].weight * scale, rtol=0, atol=0)
        assert not ours.attn.proj.weight.any() and not ours.ffn.layers[1].weight.any()
        assert ours.ls1.weight.item() == ours.ls2.weight.item() == 1.
    # the rest is the default draw
    torch.testing.assert_close(fixup.pos_embed, default.pos_embed, rtol=0, atol=0)


def test_t_fixup_rules():
    """T-Fixup's encoder rules (Huang et al. 2020): Xavier-uniform q, k, v, proj, fc1, fc2 (bound sqrt(6 / (fan_in +
    fan_out))), with v, proj, fc1 and fc2 x 0.67 N^(-1/4); a uniform draw fills its bound and has variance
    bound^2 / 3."""
    width, depth = 96, 16
    model = CaiT(arch=dict(embed_dims=width, num_layers=depth, num_heads=4), img_size=32, patch_size=16,
                 residual_scale='scalar', layer_scale_init_value=1., branch_init='t-fixup')
    torch.manual_seed(5)
    model.init_weights()
    scale = 0.67 * depth ** -0.25

    def check(weight, fan_in, fan_out, factor):
        bound = factor * (6 / (fan_in + fan_out)) ** 0.5
        assert weight.abs().max() <= bound * (1 + 1e-6)
        assert weight.abs().max() > 0.95 * bound
        assert weight.var().item() == pytest.approx(bound ** 2 / 3, rel=0.1)

    for block in model.layers:
        q, k, v = block.attn.qkv.weight.chunk(3, dim=0)
        check(q, width, width, 1.)
        check(k, width, width, 1.)
        check(v, width, width, scale)
        check(block.attn.proj.weight, width, width, scale)
        check(block.ffn.layers[0][0].weight, width, 4 * width, scale)
        check(block.ffn.layers[1].weight, 4 * width, width, scale)


@pytest.mark.parametrize('schedule', ['uniform', 'linear'])
def test_drop_path_schedules(schedule):
    """Uniform: d_r in every SA block (Sec. 4.1.1); linear: block i of L gets d_r * i / (L - 1) (DeiT); none in the
    class-attention blocks."""
    rate = 0.2
    model = CaiT(arch=ARCH, img_size=32, patch_size=16, drop_path_rate=rate, drop_path_schedule=schedule)
    expected = [rate] * DEPTH if schedule == 'uniform' else [rate * i / (DEPTH - 1) for i in range(DEPTH)]
    assert [b.drop_path_rate for b in model.layers] == pytest.approx(expected)
    assert [b.drop_path_rate for b in model.class_attn.layers] == [0., 0.]
    model.drop_path_rate = 0.1  # a scheduled-drop-path hook keeps the schedule
    assert model.layers[-1].drop_path_rate == pytest.approx(0.1)
    assert model.layers[0].drop_path_rate == pytest.approx(0.1 if schedule == 'uniform' else 0.)


def test_multi_head_attention_has_no_head_mixing():
    model = CaiT(arch=ARCH, img_size=32, patch_size=16, attn_type='multi_head')
    assert not any('proj_l' in n or 'proj_w' in n for n, _ in model.named_parameters())
    talking = CaiT(arch=ARCH, img_size=32, patch_size=16)
    # talking heads adds two (h x h + h) mixers per SA block
    assert sum(p.numel() for p in talking.parameters()) - sum(p.numel() for p in model.parameters()) == \
        DEPTH * 2 * (HEADS * HEADS + HEADS)


def test_branch_init_leaves_loaded_weights_alone_and_needs_the_scalar_weighting(tmp_path):
    """Fixup / T-Fixup are the paper's adaptations with a learned scalar alpha per branch; loaded weights (an
    ``init_cfg`` dict or list with ``Pretrained``) are never re-initialised by them."""
    settings = dict(arch=ARCH, img_size=48, patch_size=16, residual_scale='scalar', layer_scale_init_value=1.,
                    branch_init='fixup')
    source = CaiT(**settings)
    for parameter in source.parameters():
        torch.nn.init.normal_(parameter)
    torch.save({'state_dict': source.state_dict()}, tmp_path / 'trained.pth')
    for init_cfg in (dict(type='Pretrained', checkpoint=str(tmp_path / 'trained.pth')),
                     [dict(type='Pretrained', checkpoint=str(tmp_path / 'trained.pth'))]):
        loaded = CaiT(**settings, init_cfg=init_cfg)
        loaded.init_weights()
        for name, value in source.state_dict().items():
            assert torch.equal(loaded.state_dict()[name], value), name
    fresh = CaiT(**settings)
    fresh.init_weights()
    assert all(block.attn.proj.weight.abs().sum() == 0 for block in fresh.layers)  # Fixup: each branch ends at 0
    for bad in (dict(residual_scale='layerscale'), dict(residual_scale='none'), dict(layer_scale_init_value=0.)):
        with pytest.raises(UserInputError, match='branch_init=.fixup. is the paper.s adaptation'):
            CaiT(**{**settings, **bad})


def test_a_layer_scale_of_zero_is_no_layer_scale():
    """As everywhere in mmcausal, ``layer_scale_init_value=0`` leaves the branches unweighted (a LayerScale of 0
    would turn every block into the identity)."""
    model = CaiT(arch=ARCH, img_size=48, patch_size=16, layer_scale_init_value=0.)
    assert not [name for name in model.state_dict() if '.ls1.' in name or '.ls2.' in name]
    assert isinstance(model.layers[0].ls1, torch.nn.Identity)
