"""Fine-tuning a 224 px iLLaMA at 384 px (paper Sec. 4.2, Table 14): the 224 px state dict loads strictly into the
384 px model, its position table resized bicubically (the 14 x 14 patch rows to 24 x 24, align_corners=False, the
class-token row, last, kept), and RoPE is computed for the 577 tokens of the 384 px sequence."""
import pytest
import torch
import torch.nn.functional as F
from mmengine.runner.checkpoint import load_state_dict

from mmcausal.models.illama import ILLaMA

ARCH = dict(embed_dims=32, num_layers=1, num_heads=2)  # head_dim 16


def _model(img_size: int) -> ILLaMA:
    model = ILLaMA(arch=ARCH, img_size=img_size, mask_mode='official', out_type='raw')
    model.init_weights()
    return model.eval()


def _bicubic(table: torch.Tensor, src: int, dst: int) -> torch.Tensor:
    """The expected table, written out: patch rows as a (D, src, src) image resized to (dst, dst), cls row last."""
    dims = table.shape[-1]
    patches = table[:, :-1].reshape(1, src, src, dims).permute(0, 3, 1, 2)
    resized = F.interpolate(patches, size=(dst, dst), mode='bicubic', align_corners=False)
    return torch.cat((resized.permute(0, 2, 3, 1).reshape(1, dst * dst, dims), table[:, -1:]), dim=1)


@pytest.mark.parametrize('loader', ['torch', 'mmengine'])  # nn.Module.load_state_dict / the runner's load_from
def test_224_state_dict_loads_strictly_into_the_384_model(loader):
    torch.manual_seed(0)
    small, big = _model(224), _model(384)
    state = small.state_dict()
    assert state['pos_embed'].shape == (1, 14 * 14 + 1, 32)
    if loader == 'torch':
        big.load_state_dict(state, strict=True)  # raises on a missing or unexpected key or a shape left unresized
    else:
        load_state_dict(big, dict(state), strict=True)
    assert big.pos_embed.shape == (1, 24 * 24 + 1, 32)
    torch.testing.assert_close(big.pos_embed.detach(), _bicubic(state['pos_embed'], 14, 24))
    loaded = big.state_dict()
    for key, value in state.items():
        if key != 'pos_embed':
            torch.testing.assert_close(loaded[key], value, rtol=0, atol=0, msg=key)


def test_the_384_model_runs_577_tokens_with_rope_over_the_whole_sequence():
    torch.manual_seed(0)
    small, big = _model(224), _model(384)
    big.load_state_dict(small.state_dict())
    angles = big.rope.sequence_angles((24, 24), big.cls_position)
    assert angles.shape == (577, 8)  # one angle per position and frequency: positions 0..576, cls at 576
    torch.testing.assert_close(angles, torch.arange(577.)[:, None] * angles[1])
    image = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        out = big(image)[0]
        # the 224 px model resizes its table to the 384 px grid at run time: the same table, the same RoPE
        torch.testing.assert_close(out, small(image)[0])
    assert out.shape == (1, 577, 32)
