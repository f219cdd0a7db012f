"""The LLaMA SwiGLU width rule."""
import pytest
import torch

from mmcausal.models.layers import (
    swiglu_hidden_dims,
)

torch.manual_seed(0)


@pytest.mark.parametrize('dims,hidden', [(192, 512), (384, 1024), (768, 2048), (1024, 2816)])
def test_swiglu_width_rule(dims, hidden):
    assert swiglu_hidden_dims(dims) == hidden
