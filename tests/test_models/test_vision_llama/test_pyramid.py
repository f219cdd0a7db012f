"""PyramidVisionLLaMA: sizes of the paper, any input size, per-stage RoPE anchors, options that need each other.

The OpenMMLab contract (outputs, frozen stages, layer depths, with_cp, transposed inputs) is in test_contract.py
and the official numerics in tests/test_converters/test_pyramid_vision_llama.py.
"""
import pytest
import torch

from mmcausal.models.vision_llama import PyramidVisionLLaMA, SubsampledAttention, WindowedAttention

CLASSIFIER = dict(out_type='avg_featmap', out_indices=-1, norm_after_stage=False, final_norm=True)


@pytest.mark.parametrize('arch,classes_dims,expected', [
    ('small', 512, 25_903_976),  # the official registration (the README's 22M is not this model)
    ('base', 768, 56_029_480),
    ('large', 1024, 104_721_128),  # ours; the README says 99M
])
def test_parameter_counts_with_a_1000_class_head(arch, classes_dims, expected):
    model = PyramidVisionLLaMA(arch, **CLASSIFIER)
    assert sum(p.numel() for p in model.parameters()) + classes_dims * 1000 + 1000 == expected


def test_blocks_alternate_lsa_and_gsa_with_the_stage_reduction():
    model = PyramidVisionLLaMA('small')
    for stage, sr in zip(model.stages, (8, 4, 2, 1)):
        mixers = [block.attn for block in stage.blocks]
        assert all(isinstance(m, WindowedAttention) and m.window_size == 7 for m in mixers[0::2])
        assert all(isinstance(m, SubsampledAttention) and m.sr_ratio == sr for m in mixers[1::2])
    assert model.stages[0].blocks[0].ls1.weight.detach()[0].item() == pytest.approx(1e-4)
    assert [rope.anchor for rope in model.ropes] == [(56, 56), (28, 28), (14, 14), (7, 7)]
    assert [rope.anchor for rope in PyramidVisionLLaMA('small', rope_anchor=14).ropes] == [(14, 14)] * 4


@pytest.mark.parametrize('size', [(225, 311), (33, 17), (8, 8)])
def test_any_input_size_runs_at_every_stage(size):
    """Sizes that are not multiples of the strides, windows or sr are padded (also smaller than one window)."""
    torch.manual_seed(0)
    model = PyramidVisionLLaMA('small').eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *size))
    grid, shapes = size, []
    for patch in (4, 2, 2, 2):
        grid = tuple(-(-side // patch) for side in grid)
        shapes.append(grid)
    assert [tuple(o.shape[-2:]) for o in outs] == shapes
    assert all(torch.isfinite(o).all() for o in outs)


def test_the_official_double_norm_needs_the_classifier_outputs():
    with pytest.raises(ValueError, match='official_double_norm'):
        PyramidVisionLLaMA('small', official_double_norm=True)
    with pytest.raises(ValueError, match=r'out_indices=\(3, \)'):  # pooling stage 0 with the 512-wide final norm
        PyramidVisionLLaMA('small', out_type='avg_featmap', final_norm=True, official_double_norm=True,
                           out_indices=(0, 1, 2, 3))
    PyramidVisionLLaMA('small', out_type='avg_featmap', final_norm=True, official_double_norm=True, out_indices=(3, ))
    with pytest.raises(ValueError, match='one entry per stage'):
        PyramidVisionLLaMA('small', sr_ratios=(8, 4, 2))
    with pytest.raises(ValueError, match="Unknown gsa_key_pos 'centre'"):
        PyramidVisionLLaMA('small', gsa_key_pos='centre')
