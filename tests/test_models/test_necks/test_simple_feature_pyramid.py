"""SimpleFeaturePyramid (ViTDet neck): level shapes, ViTDet's LayerNorm2d eps and conv init."""
import math

import pytest
import torch
from torch import nn

from mmcausal.models.necks import SimpleFeaturePyramid


def test_levels_have_strides_4_to_64():
    neck = SimpleFeaturePyramid(in_channels=32, out_channels=16, num_outs=5)
    outs = neck((torch.randn(2, 32, 6, 4), ))
    assert [tuple(o.shape) for o in outs] == [(2, 16, 24, 16), (2, 16, 12, 8), (2, 16, 6, 4), (2, 16, 3, 2),
                                              (2, 16, 2, 1)]


def test_layer_norms_use_vitdet_eps():
    """ViTDet's LayerNorm2d (detectron2 `LayerNorm`) has eps 1e-6 (mmdet's ViTDet project gets mmcv's 1e-5: the
    ``norm_eps`` option, below)."""
    neck = SimpleFeaturePyramid(in_channels=32, out_channels=16)
    norms = [m for m in neck.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 1 + 2 * 4  # the stride-4 branch's norm + two per output level
    assert all(m.eps == 1e-6 for m in norms)


def test_convs_use_vitdet_init():
    """Output convs: Caffe2 MSRAFill (kaiming normal, fan_out, ReLU gain: std = sqrt(2 / (C_out * k * k)));
    transposed convs keep PyTorch's default (uniform, bound 1 / sqrt(fan_in)), as in ViTDet."""
    torch.manual_seed(0)
    neck = SimpleFeaturePyramid(in_channels=256, out_channels=128)
    neck.init_weights()
    convs = [m for m in neck.modules() if type(m) is nn.Conv2d]
    assert len(convs) == 8
    for conv in convs:
        fan_out = conv.out_channels * conv.kernel_size[0] * conv.kernel_size[1]
        weight = conv.weight.detach()
        assert weight.std().item() == pytest.approx(math.sqrt(2. / fan_out), rel=0.03)
        assert abs(weight.mean().item()) < 0.1 * math.sqrt(2. / fan_out)
        assert conv.bias is None
    deconv = neck.branches[1]  # stride-8 branch: ConvTranspose2d(256 -> 128, 2, 2)
    assert isinstance(deconv, nn.ConvTranspose2d)
    bound = 1. / math.sqrt(deconv.weight.shape[1] * 2 * 2)  # PyTorch: fan_in of weight (in, out, k, k) is out*k*k
    assert deconv.weight.abs().max().item() <= bound
    assert deconv.weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.05)


def test_norm_eps_option_reaches_every_layer_norm():
    """The released De-focus DINO neck's LN2d has eps 1e-5 (mmcv's default); a bad eps is refused."""
    neck = SimpleFeaturePyramid(in_channels=32, out_channels=16, num_outs=4, norm_eps=1e-5)
    norms = [m for m in neck.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 1 + 2 * 4 and all(m.eps == 1e-5 for m in norms)
    with pytest.raises(ValueError, match='norm_eps must be a positive number'):
        SimpleFeaturePyramid(in_channels=32, out_channels=16, norm_eps=0)
