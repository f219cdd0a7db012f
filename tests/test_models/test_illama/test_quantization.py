"""Quantization-aware training of iLLaMA (:mod:`mmcausal.models.illama.quantization`): the learnable fake quantizers
bound the levels, the step sizes get gradients, 8-bit QAT stays close to full precision and the state-dict keys of
the full-precision model are kept."""
import pytest
import torch
from torch import nn

from mmcausal.models.illama import ILLaMA, Int8Linear, QATLinear, convert_to_int8, quantize_blocks
from mmcausal.models.layers import BackboneConfigError

NANO = dict(arch=dict(embed_dims=32, num_layers=2, num_heads=2), img_size=32, patch_size=8)


def _qat_linear(bits, in_features=24, out_features=6):
    torch.manual_seed(0)
    return QATLinear.from_linear(nn.Linear(in_features, out_features), bits)


@pytest.mark.parametrize('bits', [8, 4])
def test_weights_take_at_most_2_to_the_bits_levels_per_channel(bits):
    layer = _qat_linear(bits, in_features=1024)
    weight = layer.quantized_weight().detach()
    scale = layer.weight_fake_quant.scale.detach()[:, None]
    for row in weight:
        assert len(torch.unique(row)) <= 2**bits
    levels = weight / scale
    assert torch.allclose(levels, levels.round(), atol=1e-4)
    assert levels.min() >= -2**(bits - 1) - 1e-4 and levels.max() <= 2**(bits - 1) - 1 + 1e-4


@pytest.mark.parametrize('bits', [8, 4])
def test_activations_take_at_most_2_to_the_bits_levels_per_tensor(bits):
    layer = _qat_linear(bits)
    x = torch.randn(4, 500, 24) * 3
    assert len(torch.unique(layer.quantize_input(x).detach())) <= 2**bits


def test_gradients_reach_the_step_sizes_not_the_zero_points():
    layer = _qat_linear(8)
    layer(torch.randn(2, 5, 24)).square().sum().backward()
    for fq in (layer.weight_fake_quant, layer.input_fake_quant):
        assert fq.scale.grad is not None and fq.scale.grad.abs().sum() > 0
        assert not fq.zero_point.requires_grad
    assert layer.weight.grad.abs().sum() > 0


def test_step_sizes_start_from_the_lsq_statistics_once():
    layer = _qat_linear(8)
    x = torch.randn(3, 7, 24)
    layer(x)
    expected = 2 * layer.weight.detach().abs().mean(1) / 127**0.5
    assert torch.allclose(layer.weight_fake_quant.scale.detach(), expected)
    assert torch.allclose(layer.input_fake_quant.scale.detach(), 2 * x.abs().mean() / 127**0.5)
    layer(10 * x)  # later batches leave the (now learned) step alone
    assert torch.allclose(layer.input_fake_quant.scale.detach(), 2 * x.abs().mean() / 127**0.5)


def test_qat_backbone_keeps_the_full_precision_keys_and_swaps_every_block_linear():
    fp, qat = ILLaMA(**NANO), ILLaMA(**NANO, qat=dict(bits=8))
    fp_keys, qat_keys = set(fp.state_dict()), set(qat.state_dict())
    assert fp_keys <= qat_keys
    assert all('fake_quant' in k for k in qat_keys - fp_keys)
    names = {n.split('.', 2)[2] for n, m in qat.named_modules() if isinstance(m, QATLinear)}
    assert names == {'attn.qkv', 'attn.proj', 'ffn.w12', 'ffn.w3'}
    assert sum(isinstance(m, QATLinear) for m in qat.modules()) == 4 * 2


def test_8_bit_qat_output_is_close_to_full_precision():
    torch.manual_seed(0)
    fp = ILLaMA(**NANO).eval()
    qat = ILLaMA(**NANO, qat=dict(bits=8)).eval()
    missing, unexpected = qat.load_state_dict(fp.state_dict(), strict=False)
    assert not unexpected and all('fake_quant' in k for k in missing)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        ref, out = fp(x)[0], qat(x)[0]
    rel = ((out - ref).norm() / ref.norm()).item()
    # measured 0.087: LSQ's initial step 2 mean|x| / sqrt(127) (about 0.14 sigma of a Gaussian) is coarser than
    # a min-max step; training then adjusts it
    assert rel < 0.15, rel


def test_qat_checkpoint_round_trip_keeps_the_learned_steps():
    qat = ILLaMA(**NANO, qat=dict(bits=4))
    qat(torch.randn(1, 3, 32, 32))
    other = ILLaMA(**NANO, qat=dict(bits=4))
    other.load_state_dict(qat.state_dict())
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(qat.eval()(x)[0], other.eval()(x)[0])


def test_unsupported_bits_are_refused():
    with pytest.raises(BackboneConfigError, match='qat bits'):
        quantize_blocks(ILLaMA(**NANO), bits=3)


@pytest.mark.parametrize('bits', [8, 4])
def test_int8_linear_computes_the_fake_quantized_layer_in_integers(bits):
    layer = _qat_linear(bits)
    x = torch.randn(3, 7, 24)
    with torch.no_grad():
        fake = layer(x)
        int8 = Int8Linear(layer)
        assert int8.weight_t.dtype == torch.int8
        assert int8.weight_t.min() >= -2**(bits - 1) and int8.weight_t.max() <= 2**(bits - 1) - 1
        assert torch.allclose(int8(x), fake, atol=1e-5, rtol=1e-5)


def test_int8_model_matches_the_fake_quantized_model():
    torch.manual_seed(0)
    qat = ILLaMA(**NANO, qat=dict(bits=8)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        fake = qat(x)[0]
        int8 = convert_to_int8(qat)
        assert not any(isinstance(m, QATLinear) for m in int8.modules())
        assert sum(isinstance(m, Int8Linear) for m in int8.modules()) == 8
        out = int8(x)[0]
    err = (out - fake).abs().max().item()
    assert err < 1e-4, err  # measured 3.6e-7 (outputs up to 2.5): float rounding of the rescale


def test_int8_conversion_needs_initialised_steps():
    with pytest.raises(ValueError, match='trained'):
        Int8Linear(_qat_linear(8))
