"""PyramidVisionLLaMA's Table 7(g) additions: DeiT's learnable position embedding (stage 1) and CPVT's PEG (after
the first block of every stage), each against its formula on a tiny pyramid."""
import math

import pytest
import torch
import torch.nn.functional as F

from mmcausal.models.vision_llama import PyramidVisionLLaMA
from mmcausal.models.vision_llama.absolute_position import LearnedPositionEmbedding, PositionEncodingGenerator

TINY = dict(embed_dims=[16, 32], num_heads=[1, 2], depths=[2, 2])


def _tiny(**kwargs) -> PyramidVisionLLaMA:
    torch.manual_seed(0)
    model = PyramidVisionLLaMA(TINY, patch_sizes=(4, 2), sr_ratios=(2, 1), window_size=4, pretrain_size=32,
                               rope_mode='2d', out_indices=(0, 1), **kwargs)
    model.init_weights()
    return model.eval()


def test_learned_embedding_is_added_at_its_grid_and_resized_elsewhere():
    embed = LearnedPositionEmbedding(8, (4, 4))
    tokens = torch.randn(2, 16, 8)
    torch.testing.assert_close(embed(tokens, (4, 4)), tokens + embed.weight)
    resized = F.interpolate(embed.weight.reshape(1, 4, 4, 8).permute(0, 3, 1, 2), size=(2, 6), mode='bicubic')
    wide = torch.randn(1, 12, 8)
    torch.testing.assert_close(embed(wide, (2, 6)), wide + resized.flatten(2).transpose(1, 2))


def test_peg_adds_a_depthwise_convolution_of_the_token_map():
    model = _tiny(peg=True)
    model.init_weights()  # the backbone's init reaches each stage's PEG, whose rule follows the backbone's Kaiming
    for stage in model.stages:  # Twins' fan_out / groups = 9, not the backbone's 9 D
        assert stage.peg.proj.weight.std().item() == pytest.approx(math.sqrt(2 / 9), rel=0.3)
    peg = PositionEncodingGenerator(4)
    tokens = torch.randn(2, 6, 4)  # a 2 x 3 grid
    featmap = tokens.transpose(1, 2).reshape(2, 4, 2, 3)
    conv = F.conv2d(featmap, peg.proj.weight, peg.proj.bias, padding=1, groups=4)
    torch.testing.assert_close(peg(tokens, (2, 3)), tokens + conv.flatten(2).transpose(1, 2))


def test_the_backbone_places_them_as_the_ablation_does():
    plain, lpe, peg = _tiny(), _tiny(abs_pos_embed=True), _tiny(peg=True)
    assert lpe.stages[0].pos_embed.weight.shape == (1, 8 * 8, 16) and lpe.stages[1].pos_embed is None
    assert [stage.peg.proj.groups for stage in peg.stages] == [16, 32] and plain.stages[0].peg is None
    images = torch.randn(1, 3, 32, 32)
    # no effect where they add nothing: a zero table / zero convolution
    with torch.no_grad():
        lpe.load_state_dict(plain.state_dict(), strict=False)
        lpe.stages[0].pos_embed.weight.zero_()
        peg.load_state_dict(plain.state_dict(), strict=False)
        for stage in peg.stages:
            stage.peg.proj.weight.zero_()
            stage.peg.proj.bias.zero_()
        reference = plain(images)
        torch.testing.assert_close(lpe(images), reference)
        torch.testing.assert_close(peg(images), reference)
        # the PEG acts after the first block: a bias there shifts the second block's input by exactly that bias
        inputs = []
        handle = peg.stages[1].blocks[1].register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
        peg(images)
        peg.stages[1].peg.proj.bias.fill_(1.)
        peg(images)
        handle.remove()
        torch.testing.assert_close(inputs[1] - inputs[0], torch.ones_like(inputs[0]))
    assert peg.get_layer_depth('stages.1.peg.proj.weight') == peg.get_layer_depth('stages.1.blocks.0.ls1.weight')
    assert lpe.get_layer_depth('stages.0.pos_embed.weight')[0] == 0

