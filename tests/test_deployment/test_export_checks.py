"""The checks of mmcausal.deployment.export_onnx on tiny modules: a graph that holds only at the traced size is
refused in one line (found by ONNX Runtime against PyTorch at other sizes, naming the condition it was traced under),
one that holds everywhere is written with standard ops and dynamic axes."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mmcausal.deployment import ExportError, TensorOutputs, export_onnx, non_standard_ops, onnxruntime_outputs
from mmcausal.models.layers import build_patch_embed

pytest.importorskip('onnxruntime')


class PatchMean(nn.Module):
    """A 4 px patch convolution and the mean over the patch grid: ``(B, 3, H, W) -> (B, 8)``, any size."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 8, 4, stride=4)

    def forward(self, images):
        return self.proj(images).mean((2, 3))


class DoublesAtTracedArea(PatchMean):
    """Branches on an equality of the image area (as a loop unrolled over the token count does); an equality of one
    side alone is refused by torch.export itself, which sees the dynamic dimension specialised."""

    def forward(self, images):
        out = super().forward(images)
        return out * 2 if images.shape[-2] * images.shape[-1] == 256 else out


class DoublesWhenWide(PatchMean):
    """Branches on a range of the width: not an equality, so only the comparison with PyTorch finds it."""

    def forward(self, images):
        out = super().forward(images)
        return out * 2 if images.shape[-1] > 15 else out


class PaddedPatchMean(nn.Module):
    """The backbones' patch embedding (4 px patches, zero padding to whole patches) and the mean over the grid:
    ``(B, 3, H, W) -> (B, 8)`` counting the padded patches, any side."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = build_patch_embed(3, 8, 4)

    def forward(self, images):
        return self.embed(images)[0].mean(1)


def _module(cls):
    torch.manual_seed(0)
    return TensorOutputs(cls(), 'module').eval()


def test_graph_that_holds_at_every_size_exports_with_dynamic_axes(tmp_path):
    module = _module(PatchMean)
    exported = export_onnx(module, str(tmp_path / 'mean.onnx'), (1, 3, 16, 16), 'all', optimize=False)
    assert exported.input_shape == (None, 3, None, None) and exported.opset == 20
    assert non_standard_ops(exported.path) == []
    images = torch.randn(3, 3, 8, 20)
    assert torch.allclose(onnxruntime_outputs(exported.path, images)[0], module(images)[0], atol=1e-6)


def test_equality_on_the_image_size_is_refused_naming_the_condition(tmp_path):
    path = tmp_path / 'eq.onnx'
    with pytest.raises(ExportError, match=r'at input shape \(3, 3, 23, 29\) .*traced it under the condition .*== 256.*'
                                          '--dynamic batch'):
        export_onnx(_module(DoublesAtTracedArea), str(path), (1, 3, 16, 16), 'all', optimize=False)
    assert not path.exists()  # no file that is wrong at other sizes
    # a fixed image size is fine: the branch is the right one at the only size the graph takes
    export_onnx(_module(DoublesAtTracedArea), str(path), (1, 3, 16, 16), 'batch', optimize=False)
    assert path.exists()


def test_range_branch_is_found_by_comparing_with_pytorch(tmp_path):
    with pytest.raises(ExportError, match=r'does not reproduce PyTorch at input shape \(1, 3, 9, 15\)'):
        export_onnx(_module(DoublesWhenWide), str(tmp_path / 'range.onnx'), (1, 3, 16, 16), 'all', optimize=False)


def test_patch_padding_exports_for_sides_that_are_no_multiple_of_the_patch(tmp_path):
    """Traced at a multiple of the patch (no padding needed there), the graph still pads other sides: the padding
    amounts are expressions of the input's size, not a branch taken at the traced size."""
    module = _module(PaddedPatchMean)
    exported = export_onnx(module, str(tmp_path / 'padded.onnx'), (1, 3, 16, 16), 'all', optimize=False)
    for shape in [(1, 3, 18, 13), (2, 3, 5, 31)]:
        images = torch.randn(*shape)
        (actual, ) = onnxruntime_outputs(exported.path, images)
        grid = (-(-shape[2] // 4), -(-shape[3] // 4))
        expected = module.model.embed.projection(F.pad(images, (0, 4 * grid[1] - shape[3], 0, 4 * grid[0] - shape[2])))
        torch.testing.assert_close(actual, expected.flatten(2).mean(2), rtol=1e-5, atol=1e-6)
