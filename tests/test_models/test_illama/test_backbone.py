"""ILLaMA backbone: parameter counts, output conventions, any input size, errors."""
import warnings

import pytest
import torch
from mmengine.registry import init_default_scope
from mmengine.runner.checkpoint import get_state_dict, save_checkpoint, weights_to_cpu

from mmcausal.models.illama import ILLaMA
from mmcausal.models.layers.mask_mode import decode_mask_mode
from mmcausal.registry import MODELS


def _param_count(arch: str) -> int:
    with torch.device('meta'):
        init_default_scope('mmpretrain')
        model = MODELS.build(dict(
            type='ImageClassifier',
            backbone=dict(type='ILLaMA', arch=arch, img_size=224),
            head=dict(type='LinearClsHead', num_classes=1000, in_channels=ILLaMA.arch_zoo[
                next(k for k in ILLaMA.arch_zoo if arch in k)]['embed_dims'])))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize('arch,expected', [('tiny', 5_701_096), ('s', 22_018_024), ('base', 86_502_376),
                                           ('l', 310_445_032)])
def test_parameter_counts_match_official_models(arch, expected):
    assert _param_count(arch) == expected


def _tiny(**kwargs) -> ILLaMA:
    kwargs.setdefault('arch', dict(embed_dims=32, num_layers=3, num_heads=2))
    kwargs.setdefault('img_size', 64)
    model = ILLaMA(**kwargs)
    model.init_weights()
    return model.eval()


@pytest.mark.parametrize('size,grid', [((64, 64), (4, 4)), ((96, 64), (6, 4)), ((50, 70), (4, 5)),
                                       ((17, 16), (2, 1))])
def test_featmap_follows_input_size(size, grid):
    model = _tiny(out_type='featmap', out_indices=(0, -1))
    outs = model(torch.randn(2, 3, *size))
    assert len(outs) == 2
    for out in outs:
        assert out.shape == (2, 32, *grid)


def test_output_types_and_cls_token_is_last():
    x = torch.randn(2, 3, 64, 48)
    model = _tiny(out_type='raw')
    raw = model(x)[0]
    assert raw.shape == (2, 4 * 3 + 1, 32)
    expected = dict(cls_token=raw[:, -1], avg_featmap=raw[:, :-1].mean(1),
                    featmap=raw[:, :-1].transpose(1, 2).reshape(2, 32, 4, 3))
    for out_type, value in expected.items():
        model.out_type = out_type
        torch.testing.assert_close(model(x)[0], value)


def test_causal_backbone_patch_tokens_ignore_later_patches():
    model = _tiny(out_type='raw', mask_mode='causal')
    x = torch.randn(1, 3, 64, 64)
    x_changed = x.clone()
    x_changed[:, :, 48:, :] = torch.randn(1, 3, 16, 64)  # the last row of patches (tokens 12..15)
    out, out_changed = model(x)[0], model(x_changed)[0]
    torch.testing.assert_close(out[:, :12], out_changed[:, :12])
    assert not torch.allclose(out[:, -1], out_changed[:, -1])  # the cls token (last) sees everything


def test_soft_mask_rate_reaches_every_block_and_is_validated():
    model = _tiny(mask_mode='official')
    model.soft_mask_rate = 0.25
    assert all(layer.attn.soft_mask_rate == 0.25 for layer in model.layers)
    with pytest.raises(ValueError, match=r'\[0, 1\]'):
        model.soft_mask_rate = 1.5


def test_frozen_stages_freeze_stem_and_blocks():
    model = _tiny(frozen_stages=2)
    model.train()
    assert not model.pos_embed.requires_grad and not model.cls_token.requires_grad
    assert not any(p.requires_grad for p in model.layers[1].parameters())
    assert all(p.requires_grad for p in model.layers[2].parameters())
    assert not model.layers[0].training and model.layers[2].training


def test_loading_a_224_checkpoint_into_a_384_model_resizes_pos_embed():
    small = ILLaMA(arch=dict(embed_dims=32, num_layers=1, num_heads=2), img_size=64)
    big = ILLaMA(arch=dict(embed_dims=32, num_layers=1, num_heads=2), img_size=96)
    big.load_state_dict(small.state_dict())
    assert big.pos_embed.shape == (1, 37, 32)
    torch.testing.assert_close(big.pos_embed[:, -1], small.pos_embed[:, -1])


@pytest.mark.parametrize('kwargs,match', [
    (dict(arch='huge'), "Unknown arch 'huge'"),
    (dict(arch=dict(embed_dims=32)), 'missing keys'),
    (dict(out_type='tokens'), 'Unknown out_type'),
    (dict(out_indices=(5, )), 'out of range'),
])
def test_bad_configuration_errors_say_what_to_change(kwargs, match):
    kwargs.setdefault('arch', dict(embed_dims=32, num_layers=3, num_heads=2))
    with pytest.raises(ValueError, match=match):
        ILLaMA(**kwargs)


def test_bad_input_shape_is_a_clear_error():
    with pytest.raises(ValueError, match=r'Expected images of shape \(B, 3, H, W\)'):
        _tiny()(torch.randn(2, 64, 64))


def test_layer_depth_for_layer_decay():
    model = _tiny()
    assert model.get_layer_depth('backbone.pos_embed', 'backbone.') == (0, 5)
    assert model.get_layer_depth('backbone.layers.1.attn.qkv.weight', 'backbone.') == (2, 5)
    assert model.get_layer_depth('backbone.norm.weight', 'backbone.') == (4, 5)


def test_gradient_checkpointing_gives_the_same_gradients_with_less_saved_memory():
    """``with_cp`` (official mask, drop path on): identical outputs and gradients; the forward keeps far fewer
    activations for the backward (bytes packed by autograd's saved-tensor hooks)."""
    images = torch.randn(2, 3, 64, 64)
    outputs, grads, saved = [], [], []
    for with_cp in (False, True):
        torch.manual_seed(0)
        model = ILLaMA(arch=dict(embed_dims=32, num_layers=3, num_heads=2), img_size=64, mask_mode='official',
                       drop_path_rate=0.3, with_cp=with_cp, out_type='featmap', out_indices=(0, 2))
        model.init_weights()
        model.train()
        nbytes = [0]

        def pack(tensor):
            nbytes[0] += tensor.numel() * tensor.element_size()
            return tensor

        torch.manual_seed(1)  # same drop-path draws in both runs
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            outs = model(images)
        sum(out.square().sum() for out in outs).backward()
        outputs.append(outs)
        grads.append({name: p.grad for name, p in model.named_parameters()})
        saved.append(nbytes[0])
    for plain, checkpointed in zip(*outputs):
        torch.testing.assert_close(plain, checkpointed)
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], msg=name)
    assert saved[1] < saved[0] / 3, saved


# ---------------------------------------------------------------------------------- mask-mode record
TINY = dict(embed_dims=32, num_layers=2, num_heads=2)


def _with_mode(mask_mode: str, **kwargs) -> ILLaMA:
    return ILLaMA(arch=TINY, img_size=32, mask_mode=mask_mode, **kwargs)


def _no_warnings(load) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        load()


def test_state_dict_records_the_mask_mode_and_loading_checks_it():
    state = _with_mode('official').state_dict()
    assert decode_mask_mode(state['mask_mode']) == 'official'
    with pytest.warns(UserWarning, match="trained with mask_mode='official'.*uses mask_mode='causal'"):
        _with_mode('causal').load_state_dict(state, strict=True)
    _no_warnings(lambda: _with_mode('official').load_state_dict(state, strict=True))
    legacy = {key: value for key, value in state.items() if key != 'mask_mode'}  # files without the record
    _no_warnings(lambda: _with_mode('causal').load_state_dict(legacy, strict=True))


def test_mask_mode_record_survives_runner_checkpoints_and_prefixed_pretrained_init(tmp_path):
    init_default_scope('mmpretrain')
    classifier = MODELS.build(dict(type='ImageClassifier', backbone=dict(type='ILLaMA', arch=TINY, img_size=32,
                                                                         mask_mode='official'),
                                   head=dict(type='LinearClsHead', num_classes=3, in_channels=32)))
    assert decode_mask_mode(get_state_dict(classifier)['backbone.mask_mode']) == 'official'
    path = tmp_path / 'classifier.pth'
    save_checkpoint({'state_dict': weights_to_cpu(get_state_dict(classifier))}, str(path))  # as the Runner does
    pretrained = dict(type='Pretrained', checkpoint=str(path), prefix='backbone.')
    mismatch = _with_mode('bidirectional', init_cfg=pretrained)
    with pytest.warns(UserWarning, match="trained with mask_mode='official'"):
        mismatch.init_weights()
    _no_warnings(_with_mode('official', init_cfg=pretrained).init_weights)


def test_second_init_weights_keeps_the_pretrained_stem(tmp_path):
    source = _with_mode('causal')
    with torch.no_grad():
        source.cls_token.fill_(0.5)
        source.pos_embed.fill_(0.25)
    path = tmp_path / 'backbone.pth'
    torch.save({'state_dict': source.state_dict()}, path)
    model = _with_mode('causal', init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    model.init_weights()
    model.init_weights()
    assert (model.cls_token == 0.5).all() and (model.pos_embed == 0.25).all()
