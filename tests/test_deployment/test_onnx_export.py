"""ONNX export of every family's tiny twin through tools/deployment/pytorch2onnx.py, checked in ONNX Runtime.

Each case builds the twin with its random init (seed 0), saves it as a checkpoint, exports it with the tool (which
loads the checkpoint the way tools/test.py does) and compares ONNX Runtime with the PyTorch model at other input sizes
(batch and image size differing from the traced ones where the export is dynamic; with a dynamic image size, sides
that are no multiple of the model's strides, 80 px and odd ones, which the graph pads inside): max |delta| < 1e-4 in
fp32. The graphs hold only standard ONNX ops.
"""
import importlib.util
from pathlib import Path

import pytest
import torch

from mmcausal.analysis.inputs import build_model
from mmcausal.deployment import exportable_part, non_standard_ops, onnxruntime_outputs
from mmcausal.utils.config_reading import read_config
from report_utils import report_text

pytest.importorskip('onnxruntime')
ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-4


def _tool():
    spec = importlib.util.spec_from_file_location('pytorch2onnx', ROOT / 'tools/deployment/pytorch2onnx.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _twin(config: str, cfg_options=None):
    cfg = read_config(str(ROOT / config), cfg_options)
    return cfg, build_model(cfg)


def _export(tmp_path, config: str, *args: str, cfg_options=None):
    """Save the twin's random weights, export them with the tool; the PyTorch model and the ONNX file."""
    cfg, model = _twin(config, cfg_options)
    checkpoint = tmp_path / 'twin.pth'
    torch.save({'state_dict': model.state_dict()}, checkpoint)
    out = tmp_path / 'twin.onnx'
    options = [f'{key}={value}' for key, value in (cfg_options or {}).items()]
    _tool().main([str(ROOT / config), str(checkpoint), str(out), '--no-optimize', *args,
                  *(['--cfg-options', *options] if options else [])])
    return model, str(out)


def _max_delta(model, part: str, path: str, shape) -> float:
    images = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = exportable_part(model, part)(images)
    actual = onnxruntime_outputs(path, images)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
    return max(float((a - e).abs().max()) for a, e in zip(actual, expected))


#: the classifiers' twins with 2 of their 4 blocks: every kind of block is exported, in half the time
TWO_BLOCKS = {'model.backbone.arch.num_layers': 2}
#: image sizes that are no multiple of any twin's strides (patch 8 or 16, pyramid windows of 4 tokens, sr 2)
ANY_SIZE = [(1, 3, 80, 80), (3, 3, 47, 81)]
# (config, tool arguments, part, the input shapes compared, config options)
DYNAMIC = [
    ('configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py', ['--dynamic'], 'model', ANY_SIZE,
     TWO_BLOCKS),
    ('configs/vision_llama/vitdet_mask-rcnn_vision-llama-nano-p16_sfp_1xb4-36e_shapes-128px.py',
     ['--dynamic', '--backbone-only'], 'backbone', [(1, 3, 80, 80), (2, 3, 97, 161)], None),
    # traced at the default 224 px: several LSA windows per side at every stage (at 64 px, one at the second)
    ('configs/pyramid_vision_llama/pyramid-vision-llama-nano_1xb32-60e_shapes-64px.py', ['--dynamic'], 'model',
     ANY_SIZE, None),
    ('configs/defocus/defocus-vit-nano-p8_1xb32-45e_shapes-64px.py', ['--dynamic'], 'model', ANY_SIZE, TWO_BLOCKS),
    ('configs/defocus/defocus-retnet-nano-p8_1xb32-30e_shapes-64px.py', ['--dynamic'], 'model', ANY_SIZE,
     TWO_BLOCKS),
    ('configs/cait/cait-nano-p16_1xb64-150e_shapes-64px.py', ['--dynamic'], 'model', ANY_SIZE, TWO_BLOCKS),
    # the closed-form scan: 7 to 166 tokens (1 to 11 chunks of 16) from one graph traced at 17 (2 chunks)
    ('configs/defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py', ['--dynamic'], 'model',
     [*ANY_SIZE, (1, 3, 17, 40), (2, 3, 161, 225)], TWO_BLOCKS),
    ('configs/illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py', ['--dynamic', 'batch'], 'model',
     [(1, 3, 64, 64), (2, 3, 64, 64)], None),
    ('configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py', ['--dynamic', '--features'],
     'features', [(1, 3, 80, 80), (2, 3, 97, 161)], None),
]


@pytest.mark.e2e  # a whole twin through the tool and ONNX Runtime: 5 to 90 s each on 2 cores
@pytest.mark.parametrize('config,args,part,shapes,options', DYNAMIC,
                         ids=[Path(case[0]).stem.split('_')[0] + '-' + case[2] for case in DYNAMIC])
def test_export_matches_pytorch(tmp_path, single_thread, config, args, part, shapes, options):
    model, path = _export(tmp_path, config, *args, cfg_options=options)
    assert non_standard_ops(path) == []
    for shape in shapes:
        assert _max_delta(model, part, path, shape) < TOLERANCE


@pytest.mark.e2e  # about 5 s each
@pytest.mark.parametrize('mask_mode,alpha', [('causal', 0.), ('official', 0.3), ('bidirectional', 0.)])
def test_illama_exports_in_every_mask_mode(tmp_path, single_thread, mask_mode, alpha):
    options = {'model.backbone.mask_mode': mask_mode, 'model.backbone.soft_mask_rate': alpha, **TWO_BLOCKS}
    model, path = _export(tmp_path, 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py', '--dynamic',
                          cfg_options=options)
    assert model.backbone.mask_mode == mask_mode
    for shape in ANY_SIZE:
        assert _max_delta(model, 'model', path, shape) < TOLERANCE



def test_segmentor_dynamic_image_size_is_refused_in_one_line(tmp_path):
    """UperNet's pyramid pooling pools adaptively, which ONNX writes with the traced size's kernels."""
    with pytest.raises(SystemExit) as exit_info:
        _export(tmp_path, 'configs/illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py', '--dynamic')
    message = report_text(exit_info.value)
    assert message.startswith('ExportError: EncoderDecoder cannot be exported with a dynamic image size: '
                              'decode_head.psp_modules') and '--dynamic batch' in message


def test_whole_detector_is_refused_in_one_line(tmp_path):
    config = 'configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py'
    cfg, model = _twin(config)
    checkpoint = tmp_path / 'detector.pth'
    torch.save({'state_dict': model.state_dict()}, checkpoint)
    with pytest.raises(SystemExit) as exit_info:
        _tool().main([str(ROOT / config), str(checkpoint), str(tmp_path / 'detector.onnx')])
    message = report_text(exit_info.value)
    assert message.startswith('ExportError: MaskRCNN cannot be exported whole') and '--features' in message


def test_checkpoint_that_does_not_fit_is_refused_in_one_line(tmp_path):
    """The tool loads through the coverage check: weights under another prefix would leave the model random."""
    config = 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py'
    _, model = _twin(config)
    checkpoint = tmp_path / 'wrapped.pth'
    torch.save({'state_dict': {f'model.{key}': value for key, value in model.state_dict().items()}}, checkpoint)
    with pytest.raises(SystemExit) as exit_info:
        _tool().main([str(ROOT / config), str(checkpoint), str(tmp_path / 'illama.onnx')])
    message = str(exit_info.value)
    assert message.startswith('CheckpointMismatchError: ') and "prefix 'model.'" in message
    assert '\n' not in message
    assert not (tmp_path / 'illama.onnx').exists()


#: the generators' networks shrunk to 2 blocks of width 32 on 16 x 16 latents (patch 4: a 4 x 4 token grid)
TINY_NETWORK = ("model = dict(network=dict(arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2), "
                "input_size=16, num_classes=10))\n")
GENERATORS = ['configs/dit_llama/dit-llama-base-p4_8xb32-400k_in1k-256px.py',
              'configs/dit_llama/dit-base-p4_8xb32-400k_in1k-256px.py']


def _tiny_generator_config(tmp_path, config: str) -> str:
    path = tmp_path / 'tiny_generator.py'
    path.write_text(f'_base_ = [{str(ROOT / config)!r}]\n' + TINY_NETWORK)
    return str(path)


@pytest.mark.parametrize('batch', [1, 2])
@pytest.mark.parametrize('config', GENERATORS, ids=['dit-llama', 'dit'])
def test_generator_network_exports_and_matches_pytorch(tmp_path, single_thread, config, batch):
    """The diffusion network (x, t, y) -> (B, C_out, H, W) of DiT-LLaMA (RoPE) and DiT (sin-cos table) blocks."""
    config = _tiny_generator_config(tmp_path, config)
    cfg, model = _twin(config)
    assert model.network.num_layers == 2 and model.network.input_size == (16, 16)
    torch.manual_seed(0)
    for parameter in model.network.parameters():  # adaLN-Zero starts at a zero output: random weights everywhere
        torch.nn.init.normal_(parameter, std=0.2)
    checkpoint, out = tmp_path / 'generator.pth', tmp_path / 'network.onnx'
    torch.save({'state_dict': model.state_dict()}, checkpoint)
    _tool().main([config, str(checkpoint), str(out), '--network', '--batch', str(batch), '--no-optimize'])
    assert non_standard_ops(str(out)) == []
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 4, 16, 16, generator=generator)
    t = torch.rand(batch, generator=generator) * 1000
    y = torch.randint(10, (batch, ), generator=generator)
    with torch.no_grad():
        expected = model.network(x, t, y)
    (actual, ) = onnxruntime_outputs(str(out), x, t, y)
    assert actual.shape == expected.shape == (batch, 8, 16, 16)
    assert expected.abs().max() > 0.1  # not the zero output of an untrained adaLN-Zero network
    assert float((actual - expected).abs().max()) < TOLERANCE


@pytest.mark.parametrize('args,expected', [
    ([], 'ClassConditionalDiffusion cannot be exported whole'),
    (['--network', '--dynamic'], 'network of ClassConditionalDiffusion exports at a fixed size; drop --dynamic')])
def test_generator_whole_or_dynamic_is_refused_in_one_line(tmp_path, args, expected):
    """Sampling is a loop of network calls on random noise: the tool exports the network, at a fixed size."""
    config = _tiny_generator_config(tmp_path, GENERATORS[0])
    _, model = _twin(config)
    checkpoint = tmp_path / 'generator.pth'
    torch.save({'state_dict': model.state_dict()}, checkpoint)
    with pytest.raises(SystemExit) as exit_info:
        _tool().main([config, str(checkpoint), str(tmp_path / 'generator.onnx'), *args])
    message = report_text(exit_info.value)
    assert message.startswith('ExportError: ') and expected in message
    assert '--network' in message or '--dynamic' in args
