"""The checks of mmcausal.deployment.export_onnx on tiny modules: a graph that holds only at the traced size is
refused in one line (found by ONNX Runtime against PyTorch at other sizes, naming the condition it was traced under),
one that holds everywhere is written with standard ops and dynamic axes."""
import pytest
import torch
from torch import nn

from mmcausal.deployment import (
    ExportError,
    TensorOutputs,
    export_onnx,
    non_standard_ops,
    onnxruntime_outputs,
    size_divisor,
)

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
        return out * 2 if images.shape[-1] > 12 else out


def _module(cls):
    torch.manual_seed(0)
    return TensorOutputs(cls(), 'module').eval()


def test_graph_that_holds_at_every_size_exports_with_dynamic_axes(tmp_path):
    module = _module(PatchMean)
    assert size_divisor(module) == 4
    exported = export_onnx(module, str(tmp_path / 'mean.onnx'), (1, 3, 16, 16), 'all', optimize=False)
    assert exported.input_shape == (None, 3, None, None) and exported.opset == 20
    assert non_standard_ops(exported.path) == []
    images = torch.randn(3, 3, 8, 20)
    assert torch.allclose(onnxruntime_outputs(exported.path, images)[0], module(images)[0], atol=1e-6)


def test_equality_on_the_image_size_is_refused_naming_the_condition(tmp_path):
    path = tmp_path / 'eq.onnx'
    with pytest.raises(ExportError, match=r'at input shape \(3, 3, 20, 24\) .*traced it under the condition .*== 256.*'
                                          '--dynamic batch'):
        export_onnx(_module(DoublesAtTracedArea), str(path), (1, 3, 16, 16), 'all', optimize=False)
    assert not path.exists()  # no file that is wrong at other sizes
    # a fixed image size is fine: the branch is the right one at the only size the graph takes
    export_onnx(_module(DoublesAtTracedArea), str(path), (1, 3, 16, 16), 'batch', optimize=False)
    assert path.exists()


def test_range_branch_is_found_by_comparing_with_pytorch(tmp_path):
    with pytest.raises(ExportError, match=r'does not reproduce PyTorch at input shape \(1, 3, 8, 12\)'):
        export_onnx(_module(DoublesWhenWide), str(tmp_path / 'range.onnx'), (1, 3, 16, 16), 'all', optimize=False)


def test_image_size_that_is_not_a_multiple_of_the_downsampling_is_refused(tmp_path):
    with pytest.raises(ExportError, match='multiples of 4'):
        export_onnx(_module(PatchMean), str(tmp_path / 'odd.onnx'), (1, 3, 18, 16), 'all')
