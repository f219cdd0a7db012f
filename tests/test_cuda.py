"""CUDA against CPU, skipped without a GPU: every registered backbone (the backbone contract's
tiny configurations) and the generation network give the CPU's fp32 outputs and gradients on the GPU, stay within a
stated tolerance of them under bf16 autocast with finite gradients; the masked paths (iLLaMA's soft masks at
0 < alpha < 1, windows with padding, the De-focus decay) are among the cases; SDPA takes the flash kernel where no mask
is needed and the memory-efficient one (never the math kernel) where one is.

TF32 is off for these comparisons (cuDNN enables it for convolutions by default: the patch embeddings would then
differ from the CPU by ~1e-3)."""
import copy
from typing import Optional, Tuple

import pytest
import torch
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from mmcausal.models import DiffusionTransformer, ILLaMA, VisionLLaMA
from mmcausal.models.defocus import DefocusViT
from test_models.test_contract import CASES, ODD_SIZE, TINY_ARCH, _require, build

DEVICE = 'cuda'
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
#: max |bf16 - fp32| / max |fp32| of outputs and input gradients under bf16 autocast (8 bits of mantissa, a few
#: layers deep)
BF16_TOLERANCE = 5e-2


@pytest.fixture(autouse=True)
def no_tf32():
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def _outputs_and_gradients(model: nn.Module, inputs: Tuple[Tensor, ...], forward_kwargs: dict,
                           autocast: Optional[torch.dtype] = None) -> Tuple[Tuple[Tensor, ...], Tensor, bool]:
    """``(outputs in fp32, gradient of a fixed function of them for the first input, whether every parameter
    gradient is finite)``."""
    model.zero_grad(set_to_none=True)
    first = inputs[0].clone().requires_grad_()
    device = first.device.type
    with torch.autocast(device, dtype=autocast or torch.float32, enabled=autocast is not None):
        outs = model(first, *inputs[1:], **forward_kwargs)
    outs = tuple(out.float() for out in (outs if isinstance(outs, (tuple, list)) else (outs, )))
    loss = sum((out * torch.linspace(-1, 1, out.numel(), device=out.device).view_as(out)).sum() for out in outs)
    loss.backward()
    finite = all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    return tuple(out.detach().cpu() for out in outs), first.grad.cpu(), finite


def _relative_error(got: Tensor, want: Tensor) -> float:
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-12)).item()


def _compare_with_cpu(model: nn.Module, inputs: Tuple[Tensor, ...], **forward_kwargs) -> None:
    """fp32 on the GPU equals fp32 on the CPU (values and the input gradient); bf16 autocast within
    :data:`BF16_TOLERANCE`, with finite gradients."""
    expected, expected_grad, finite = _outputs_and_gradients(model, inputs, forward_kwargs)
    assert finite
    gpu_model = copy.deepcopy(model).to(DEVICE)
    gpu_inputs = tuple(t.to(DEVICE) for t in inputs)
    outs, grad, finite = _outputs_and_gradients(gpu_model, gpu_inputs, forward_kwargs)
    assert finite
    for out, want in zip(outs, expected, strict=True):
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5)
    outs, grad, finite = _outputs_and_gradients(gpu_model, gpu_inputs, forward_kwargs, autocast=torch.bfloat16)
    assert finite
    for out, want in zip(outs, expected, strict=True):
        assert _relative_error(out, want) < BF16_TOLERANCE
    assert _relative_error(grad, expected_grad) < BF16_TOLERANCE


@pytest.mark.parametrize('name,tiny', CASES)
def test_backbone_on_cuda_equals_cpu_and_stays_close_under_bf16(name, tiny):
    """At an odd image size (padding, windows with padding where the configuration has windows)."""
    tiny = _require(tiny, name)
    model = build(name, tiny)
    torch.manual_seed(1)
    _compare_with_cpu(model, (torch.randn(2, 3, *ODD_SIZE), ), **tiny.forward_kwargs)


@pytest.mark.parametrize('mask_mode', ['causal', 'official'])
def test_illama_soft_mask_on_cuda_equals_cpu(mask_mode):
    """The soft mask at alpha = 0.5 (a float mask: the masked path), both variants."""
    torch.manual_seed(0)
    model = ILLaMA(TINY_ARCH, img_size=32, patch_size=8, mask_mode=mask_mode).eval()
    model.soft_mask_rate = 0.5
    _compare_with_cpu(model, (torch.randn(2, 3, 32, 32), ))


@pytest.mark.parametrize('block', ['llama', 'dit'])
def test_generation_network_on_cuda_equals_cpu(block):
    torch.manual_seed(0)
    model = DiffusionTransformer(arch=TINY_ARCH, patch_size=2, input_size=8, num_classes=10, block=block).eval()
    with torch.no_grad():
        for param in model.parameters():  # past the adaLN-Zero init, so every path counts
            param.normal_(0, 0.05)
    generator = torch.Generator().manual_seed(1)
    inputs = (torch.randn(3, 4, 8, 12, generator=generator), torch.randint(0, 1000, (3, ), generator=generator),
              torch.randint(0, 10, (3, ), generator=generator))
    _compare_with_cpu(model, inputs)


def _runs_with(backend: SDPBackend, model: nn.Module, images: Tensor) -> bool:
    """Whether a bf16 forward + backward runs with SDPA restricted to ``backend``."""
    try:
        with sdpa_kernel([backend]), torch.autocast(DEVICE, dtype=torch.bfloat16):
            model(images)[-1].float().sum().backward()
    except RuntimeError as error:
        if not any(reason in str(error) for reason in ('No available kernel', 'No viable backend')):
            raise
        return False
    return True


def test_sdpa_takes_flash_without_a_mask_and_the_efficient_kernel_with_one():
    """Flash for bidirectional VisionLLaMA and causal iLLaMA (``is_causal``, no mask tensor); the memory-efficient
    kernel for the masked paths: iLLaMA's soft mask at 0 < alpha < 1, windows with padding, De-focus ViT's decay."""
    torch.manual_seed(0)
    arch = dict(embed_dims=64, num_layers=2, num_heads=2)  # head dim 32
    unmasked = [VisionLLaMA(arch, img_size=32, patch_size=8), ILLaMA(arch, img_size=32, patch_size=8)]
    soft = ILLaMA(arch, img_size=32, patch_size=8)
    soft.soft_mask_rate = 0.5
    windowed = VisionLLaMA(arch, img_size=32, patch_size=8, with_cls_token=False, window_size=3, global_blocks=(1, ),
                           out_type='featmap')
    masked = [soft, windowed, DefocusViT(arch, img_size=32, patch_size=8)]
    images = torch.randn(2, 3, 40, 40, device=DEVICE)  # a 5 x 5 grid: windows of 3 need padding
    for model in unmasked:
        assert _runs_with(SDPBackend.FLASH_ATTENTION, model.to(DEVICE), images), type(model).__name__
    for model in masked:
        model.to(DEVICE)
        assert _runs_with(SDPBackend.EFFICIENT_ATTENTION, model, images), type(model).__name__
