"""De-focus Mamba: sizes of the released models, the official forward (oracle), causality, resolution transfer."""
import pytest
import torch
from mmengine.registry import init_default_scope
from mmpretrain.structures import DataSample

from mmcausal.converters import convert_defocus
from mmcausal.models.defocus import DefocusMamba, DefocusRetNet, DefocusViT
from mmcausal.models.layers import BackboneConfigError
from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError
from reference.official_defocus import DefocusMambaOfficial, official_freq

TINY = dict(embed_dims=64, num_layers=2)  # E = 128, N = 16, R = 48 as released
FAMILY = [DefocusMamba, DefocusViT, DefocusRetNet]


def _tiny(cls, **kwargs):
    """A two-block model of ``cls`` (4 heads for the attention / retention variants)."""
    arch = dict(TINY) if cls is DefocusMamba else dict(TINY, num_heads=4)
    return cls(arch, **kwargs)


@pytest.mark.parametrize('arch,hidden,expected', [('small', None, 25_092_944), ('base', None, 92_650_832),
                                                  ('large', 3072, 330_117_840)])
def test_parameter_counts_with_both_heads_are_the_released_ones(arch, hidden, expected):
    init_default_scope('mmpretrain')
    with torch.device('meta'):
        model = MODELS.build(dict(type='ImageClassifier', backbone=dict(type='DefocusMamba', arch=arch),
                                  head=dict(type='DefocusClsHead', num_classes=1000,
                                            in_channels=dict(small=384, base=768, large=1024)[arch],
                                            hidden_dims=hidden)))
    assert sum(p.numel() for p in model.parameters()) == expected


def _classifier_parameters(backbone, head):
    init_default_scope('mmpretrain')
    with torch.device('meta'):
        model = MODELS.build(dict(type='ImageClassifier', backbone=backbone, head=head))
    return sum(p.numel() for p in model.parameters())


def test_defocus_vit_base_is_deit_base_plus_the_band_pass_filter_and_the_aux_head():
    """Paper Table 1: 87.4 M (with the auxiliary head). DeiT-B built by mmpretrain, plus the aux head, plus per block
    12 decays and 32 RoPE frequencies: 87,337,184."""
    deit = _classifier_parameters(dict(type='mmpretrain.VisionTransformer', arch='deit-base'),
                                  dict(type='VisionTransformerClsHead', num_classes=1000, in_channels=768))
    ours = _classifier_parameters(dict(type='DefocusViT', arch='base'),
                                  dict(type='DefocusClsHead', num_classes=1000, in_channels=768))
    assert ours == deit + 768 * 1000 + 1000 + 12 * (12 + 32) == 87_337_184


@pytest.mark.parametrize('cls', [DefocusViT, DefocusRetNet])
def test_transformer_variants_use_a_gelu_mlp_and_explain_unknown_mixer_options(cls):
    assert isinstance(_tiny(cls).layers[0].ffn.layers[0][1], torch.nn.GELU)  # mmcv's FFN defaults to ReLU
    with pytest.raises(BackboneConfigError, match='unknown arguments'):
        _tiny(cls, chunksize=8)


def test_defocus_retnet_base_has_the_documented_layout():
    """W_Q, W_K, W_V, W_G, W_O (D x D, no bias), GroupNorm, 12 decays, 32 frequencies, LN + GELU MLP 4D per block;
    patch embedding, class token, position table, final LN, two heads: 94.4 M (the paper reports 92.7 M for its
    unreleased model)."""
    dims, hidden = 768, 3072
    block = 5 * dims ** 2 + 2 * dims + 12 + 32 + 4 * dims + 2 * dims * hidden + hidden + dims
    expected = 12 * block + (3 * 16 * 16 + 1) * dims + dims + 197 * dims + 2 * dims + 2 * (dims * 1000 + 1000)
    assert _classifier_parameters(dict(type='DefocusRetNet', arch='base'),
                                  dict(type='DefocusClsHead', num_classes=1000, in_channels=768)) == expected


def test_init_follows_the_released_code():
    model = DefocusMamba(dict(TINY))
    model.init_weights()
    mixer = model.layers[0].attn
    dt = torch.nn.functional.softplus(mixer.dt_proj.bias.detach())
    torch.testing.assert_close(dt, torch.logspace(-3, -1, 128), rtol=1e-4, atol=0)  # log-spaced 1e-3 .. 1e-1
    assert mixer.dt_proj.weight.abs().max() <= 48 ** -0.5 and mixer.dt_proj.weight.std() > 0.05  # U(+-R^-0.5)
    torch.testing.assert_close(mixer.A_log.detach(), torch.log(torch.arange(1., 17.)).expand(128, 16))
    assert (mixer.D == 1).all()
    torch.testing.assert_close(mixer.rope.freq.detach(), official_freq(16))
    assert mixer.in_proj.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert model.norm.eps == 1e-6 and model.layers[0].norm1.eps == 1e-5


def _perturbed_official(**kwargs):
    torch.manual_seed(0)
    official = DefocusMambaOfficial(d=64, depth=2, e=128, num_classes=10, **kwargs).eval()
    with torch.no_grad():  # non-trivial values everywhere, so a wrong mapping cannot hide
        for name, param in official.named_parameters():
            if name.endswith(('bias', 'weight')) and param.ndim == 1 or name.endswith(('.D', 'A_log', 'freq')):
                param.add_(torch.randn_like(param) * 0.1)
    return official


def _ours(official_state, hidden=None, **backbone):
    init_default_scope('mmpretrain')
    model = MODELS.build(dict(
        type='ImageClassifier',
        backbone=dict(type='DefocusMamba', arch=dict(TINY), img_size=224, out_type='raw', **backbone),
        head=dict(type='DefocusClsHead', num_classes=10, in_channels=64, hidden_dims=hidden))).eval()
    model.load_state_dict(convert_defocus(official_state), strict=True)
    return model


@pytest.mark.parametrize('mlp_head,scales', [(False, (1.0, 1.0)), (True, (2.0, 4.0))])
def test_converted_weights_give_the_official_logits(mlp_head, scales):
    official = _perturbed_official(mlp_head=mlp_head, delta_scale=scales[0], rope_scale=scales[1])
    ours = _ours(official.state_dict(), hidden=192 if mlp_head else None, delta_scale_factor=scales[0],
                 rope_scale_factor=scales[1])
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        expected, actual = official(images), ours(images, mode='tensor')
    assert (actual - expected).abs().max() < 1e-5


def test_per_token_aux_loss_is_the_official_one_and_pooled_is_the_paper_one():
    official = _perturbed_official()
    ours = _ours(official.state_dict())
    images, labels = torch.randn(2, 3, 224, 224), torch.tensor([3, 7])
    samples = [DataSample().set_gt_label(int(label)) for label in labels]
    with torch.no_grad():
        losses = ours.loss(images, samples)
        expected = official.aux_loss(images, labels)
        assert (losses['loss_cls'] + losses['loss_aux'] - expected).abs() < 1e-5
        ours.head.aux_loss = 'pooled'
        pooled = ours.loss(images, samples)['loss_aux']
        tokens = ours.extract_feat(images)[-1]
        paper = 0.5 * torch.nn.functional.cross_entropy(official.head2(tokens[:, :-1].mean(1)), labels)
        assert (pooled - paper).abs() < 1e-6


def test_soft_targets_are_broadcast_to_every_token():
    head = MODELS.build(dict(type='DefocusClsHead', num_classes=4, in_channels=8, aux_weight=0.5,
                             loss=dict(type='CrossEntropyLoss', use_soft=True)))
    tokens = torch.randn(2, 5, 8)
    scores = torch.softmax(torch.randn(2, 4), -1)
    samples = [DataSample().set_gt_score(score) for score in scores]
    losses = head.loss((tokens, ), samples)

    def soft_ce(logits, target):
        return -(target * logits.log_softmax(-1)).sum(-1).mean()

    token_logits = head.aux_fc(tokens[:, :-1])
    torch.testing.assert_close(losses['loss_aux'], 0.5 * soft_ce(token_logits.flatten(0, 1),
                                                                   scores.repeat_interleave(4, 0)))
    torch.testing.assert_close(losses['loss_cls'], 0.5 * soft_ce(head.fc(tokens[:, -1]), scores))
    predictions = head.predict((tokens, ))
    torch.testing.assert_close(torch.stack([p.pred_score for p in predictions]),
                               torch.softmax(head.fc(tokens[:, -1]), -1))


@pytest.mark.parametrize('cls', FAMILY)
def test_every_token_sees_only_the_tokens_before_it(cls):
    torch.manual_seed(0)
    model = _tiny(cls, img_size=64, patch_size=16, out_type='raw')
    model.init_weights()  # a zero class token would stay zero: its gate SiLU(z) = 0
    model.eval()
    images = torch.randn(1, 3, 64, 64)
    changed = images.clone()
    changed[..., 32:48, 16:32] += 1  # patch (2, 1): sequence index 9 of 16
    with torch.no_grad():
        before, after = model(images)[0], model(changed)[0]
    assert torch.equal(before[:, :9], after[:, :9])
    assert (before[:, 9:] - after[:, 9:]).abs().amax(-1).min() > 0  # it and everything after it (cls too) change


@pytest.mark.parametrize('cls', FAMILY)
def test_auto_scales_equal_the_fixed_factors_of_the_same_ratio(cls):
    torch.manual_seed(0)
    fixed = _tiny(cls, img_size=32, patch_size=8, delta_scale_factor=2.0, rope_scale_factor=4.0).eval()
    fixed.init_weights()
    auto = _tiny(cls, img_size=32, patch_size=8, delta_scale_factor='auto', rope_scale_factor='auto').eval()
    auto.load_state_dict(fixed.state_dict())
    images = torch.randn(2, 3, 64, 64)  # twice the side: r = 2, r^2 = 4
    with torch.no_grad():
        torch.testing.assert_close(auto(images), fixed(images))
        plain = _tiny(cls, img_size=32, patch_size=8).eval()
        plain.load_state_dict(fixed.state_dict())
        assert (plain(images)[0] - fixed(images)[0]).abs().max() > 1e-3  # the factors matter
        torch.testing.assert_close(auto(images[..., :32, :32]), plain(images[..., :32, :32]))  # r = 1 at img_size


@pytest.mark.parametrize('cls', FAMILY)
def test_rearranged_model_reads_the_image_section_by_section(cls):
    """Patch embedding has no overlap, so stacking the four sections of an image vertically gives a plain raster
    sequence equal to the sectioned one: both models must agree cell by cell (no position table: it would differ
    between the two grids)."""
    torch.manual_seed(0)
    kwargs = dict(img_size=32, patch_size=8, out_type='featmap')
    if cls is not DefocusMamba:
        kwargs['with_pos_embed'] = False
    rearranged = _tiny(cls, patch_rearrange=True, **kwargs).eval()
    rearranged.init_weights()
    raster = _tiny(cls, **kwargs).eval()
    raster.load_state_dict(rearranged.state_dict())
    images = torch.randn(1, 3, 64, 64)  # 2 x 2 sections of 4 x 4 patches
    stacked = torch.cat([images[..., r:r + 32, c:c + 32] for r in (0, 32) for c in (0, 32)], dim=-2)
    with torch.no_grad():
        out = rearranged(images)[0]
        reference = raster(stacked)[0]  # (1, D, 16, 4)
    sections = reference.split(4, dim=-2)
    expected = torch.cat([torch.cat(sections[0:2], dim=-1), torch.cat(sections[2:4], dim=-1)], dim=-2)
    torch.testing.assert_close(out, expected)
    with torch.no_grad():  # an input that is not whole sections is padded, and the padding cropped away
        cropped = rearranged(images[..., :50, :41])[0]
        padded = torch.nn.functional.pad(images[..., :50, :41], (0, 23, 0, 14))
        torch.testing.assert_close(cropped, rearranged(padded)[0][..., :7, :6])


@pytest.mark.parametrize('kwargs,match', [
    (dict(delta_scale_factor=0), 'delta_scale_factor'), (dict(rope_scale_factor='big'), 'rope_scale_factor'),
    (dict(arch='huge'), 'Unknown arch'), (dict(patch_rearrange=True, out_type='raw'), 'section order')])
@pytest.mark.parametrize('cls', FAMILY)
def test_bad_settings_are_explained(cls, kwargs, match):
    with pytest.raises(BackboneConfigError, match=match):
        _tiny(cls, **kwargs) if 'arch' not in kwargs else cls(**kwargs)


@pytest.mark.parametrize('aux_loss', ['per_token', 'pooled', None])
def test_logged_loss_is_the_optimised_sum(aux_loss):
    """mmengine optimises and logs as ``loss`` the sum of every key containing 'loss'; a head key named ``loss``
    would replace that logged sum by one of its terms."""
    from mmengine.model import BaseModel
    head = MODELS.build(dict(type='DefocusClsHead', num_classes=4, in_channels=8, aux_loss=aux_loss))
    samples = [DataSample().set_gt_label(label) for label in (1, 3)]
    losses = head.loss((torch.randn(2, 5, 8), ), samples)
    optimised, logged = BaseModel.parse_losses(head, losses)
    expected = sum(value for value in losses.values())
    torch.testing.assert_close(optimised, expected)
    torch.testing.assert_close(logged['loss'], expected)


def test_head_on_pooled_features_says_to_return_the_tokens():
    head = MODELS.build(dict(type='DefocusClsHead', num_classes=4, in_channels=8))
    with pytest.raises(UserInputError, match='out_type="raw"'):
        head.predict((torch.randn(2, 8), ))
