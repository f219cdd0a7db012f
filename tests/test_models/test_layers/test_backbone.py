"""The backbone bases: runtime drop path, token order, and the stage-based PyramidBackbone on a toy pyramid."""
from functools import partial

import pytest
import torch
from mmcv.cnn.bricks.transformer import PatchEmbed
from torch import nn

from mmcausal.models.layers import GridRoPE, SelfAttention, SwiGLUFFN, TokenLayout, TransformerBlock, build_norm_layer
from mmcausal.models.vision_llama import VisionLLaMA, WindowedAttention
from mmcausal.models.vision_llama.pyramid import PyramidBackbone, PyramidStage


def _plain(**kwargs):
    torch.manual_seed(0)
    kwargs.setdefault('out_type', 'avg_featmap')
    return VisionLLaMA(dict(embed_dims=32, num_layers=4, num_heads=2), img_size=32, patch_size=8, rope_anchor=4,
                       with_cls_token=False, **kwargs).eval()


def test_drop_path_rate_spreads_linearly_and_can_be_rescheduled():
    model = _plain(drop_path_rate=0.3)
    assert [round(b.drop_path_rate, 6) for b in model.layers] == [0., 0.1, 0.2, 0.3]
    model.drop_path_rate = 0.6  # what a scheduled-drop-path hook does between epochs
    assert model.drop_path_rate == 0.6 and [round(b.drop_path_rate, 6) for b in model.layers] == [0., .2, .4, .6]
    with pytest.raises(ValueError, match='drop_path_rate'):
        model.drop_path_rate = 1.5


def test_featmaps_undo_a_token_order():
    """A layout whose sequence visits the grid in another order gives the same raster feature map."""
    model = _plain(out_type='featmap', rope_mode='2d')
    grid = (4, 4)
    order = torch.randperm(16, generator=torch.Generator().manual_seed(0))
    tokens = torch.randn(1, 16, 32)
    raster = model._format_output(tokens, TokenLayout(grid))
    shuffled = model._format_output(tokens[:, order], TokenLayout(grid, order=order))
    torch.testing.assert_close(shuffled, raster, rtol=0, atol=0)


class ToyPyramid(PyramidBackbone):
    """Two stages (patch 4, then 2), an LSA + global block each, 2D RoPE per stage: a minimal Twins layout."""

    def __init__(self, out_indices=(0, 1), out_type='featmap', frozen_stages=-1, drop_path_rate=0., with_cp=False):
        super().__init__()
        self.in_channels = 3
        dims, stages = (16, 32), []
        self.ropes = nn.ModuleList(GridRoPE(8, mode='as2d', anchor=4 // i, requires_2d=True) for i in (1, 2))
        for index, (dim, patch) in enumerate(zip(dims, (4, 2))):
            embed = PatchEmbed(in_channels=3 if index == 0 else dims[0], embed_dims=dim, kernel_size=patch,
                               stride=patch, padding='corner', norm_cfg=dict(type='LN'))
            attention = dict(num_heads=dim // 8, mask_mode='bidirectional')
            mixers = (partial(WindowedAttention, window_size=2, **attention), partial(SelfAttention, **attention))
            blocks = [TransformerBlock(dim, mixer, partial(SwiGLUFFN, feedforward_channels=2 * dim,
                                                           add_identity=False), norm_cfg=dict(type='LN'))
                      for mixer in mixers]
            stages.append(PyramidStage(embed, blocks, build_norm_layer(dict(type='LN'), dim)))
        self.stages = nn.ModuleList(stages)
        self.norm = nn.Identity()
        self.pool_norm = build_norm_layer(dict(type='LN'), dims[-1]) if out_type == 'avg_featmap' else nn.Identity()
        self.with_cp = with_cp
        self.drop_path_rate = drop_path_rate
        self._set_outputs(out_indices, out_type, frozen_stages)
        self._freeze_stages()

    def stage_layout(self, index, grid, tokens):
        rope = self.ropes[index]
        return TokenLayout(grid, None, rope.sequence_angles(grid, None, tokens.device), rope)


def test_pyramid_outputs_one_map_per_stage_at_any_size():
    torch.manual_seed(0)
    model = ToyPyramid().eval()
    outs = model(torch.randn(2, 3, 30, 22))  # padded to 8 x 6, then 4 x 3 tokens
    assert [tuple(o.shape) for o in outs] == [(2, 16, 8, 6), (2, 32, 4, 3)]
    pooled = ToyPyramid(out_indices=-1, out_type='avg_featmap').eval()(torch.randn(2, 3, 32, 32))
    assert [tuple(o.shape) for o in pooled] == [(2, 32)]
    with pytest.raises(ValueError, match='out_indices'):
        ToyPyramid(out_indices=(2, ))


def test_pyramid_frozen_stages_and_layer_depth_count_blocks_across_stages():
    model = ToyPyramid(frozen_stages=1).train()
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
    assert frozen == {name for name, _ in model.named_parameters() if name.startswith('stages.0.')}
    assert not model.stages[0].blocks[0].training and model.stages[1].blocks[0].training
    depth = {name: model.get_layer_depth(name) for name, _ in model.named_parameters()}
    assert all(total == 6 for _, total in depth.values())
    assert depth['stages.0.patch_embed.projection.weight'][0] == 0
    assert depth['stages.0.blocks.1.attn.qkv.weight'][0] == 2 and depth['stages.0.norm.weight'][0] == 2
    assert depth['stages.1.patch_embed.projection.weight'][0] == 3 == depth['stages.1.blocks.0.ffn.w3.weight'][0]
    assert depth['stages.1.blocks.1.norm1.weight'][0] == 4 == depth['stages.1.norm.weight'][0]
    ids = [depth[name][0] for name, _ in model.named_parameters()]
    assert ids == sorted(ids), 'ids never fall along the network'


def test_pyramid_drop_path_and_gradient_checkpointing():
    model = ToyPyramid(drop_path_rate=0.3)
    assert [round(b.drop_path_rate, 6) for b in model.blocks()] == [0., 0.1, 0.2, 0.3]
    images = torch.randn(2, 3, 32, 32)
    grads = []
    for with_cp in (False, True):
        torch.manual_seed(0)
        model = ToyPyramid(with_cp=with_cp).train()
        sum(o.square().sum() for o in model(images)).backward()
        grads.append(model.stages[0].blocks[0].attn.qkv.weight.grad)
    torch.testing.assert_close(grads[0], grads[1])
