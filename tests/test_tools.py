"""Command-line entry points: multi-process CPU training (torchrun + gloo) and the libraries' own tools."""
import importlib.util
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Dict, List

import pytest
import torch

from e2e_utils import data_options, run_command
from mmcausal.utils import load_checkpoint_file
from zygote import run_python

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(importlib.util.find_spec('mmdet').origin).parents[1]  # site-packages
CLS = 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py'
SEG = 'configs/illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py'
DET = 'configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py'
PYRAMID = 'configs/pyramid_vision_llama'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_two_process_torchrun_on_cpu_with_gloo_resumes_elsewhere(shapes_root, tmp_path):
    """Two gloo ranks train 2 epochs; a second job trains 1 epoch, its checkpoint is copied into a fresh
    work dir with a fresh HOME (a requeued job in a new container) and resumed to epoch 2."""
    def dist_train(work_dir, epochs, *extra, **env):
        return run_command([
            'bash', 'tools/dist_train.sh', CLS, '2', '--work-dir', str(work_dir), *extra, '--cfg-options',
            f'train_cfg.max_epochs={epochs}', 'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=1',
            *data_options(shapes_root, 'imagenet')
        ], PYTHON=sys.executable, PORT=str(_free_port()), **env)

    result = dist_train(tmp_path / 'straight', 2)
    log = result.stdout + result.stderr
    assert 'Distributed training: True' in log
    assert 'gloo' in log.lower()
    assert 'accuracy/top1' in log

    dist_train(tmp_path / 'first', 1)
    container = tmp_path / 'container'
    (container / 'work').mkdir(parents=True)
    (container / 'home').mkdir()
    shutil.copy(tmp_path / 'first' / 'epoch_1.pth', container / 'work' / 'epoch_1.pth')
    result = dist_train(container / 'work', 2, '--resume', str(container / 'work' / 'epoch_1.pth'),
                        HOME=str(container / 'home'))
    assert 'resumed epoch: 1' in result.stdout + result.stderr
    straight = load_checkpoint_file(str(tmp_path / 'straight' / 'epoch_2.pth'))['state_dict']
    resumed = load_checkpoint_file(str(container / 'work' / 'epoch_2.pth'))['state_dict']
    for name, value in straight.items():
        torch.testing.assert_close(resumed[name], value, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize('library,config,options', [
    ('mmpretrain', CLS, ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmseg', SEG, ['train_cfg.max_iters=10', 'train_cfg.val_interval=10']),
    ('mmdet', DET, ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmpretrain', 'configs/vision_llama/mae_vision-llama-nano-p8_1xb32-20e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_dataloader.dataset.data_root=SHAPES/imagenet']),
    ('mmpretrain', 'configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmseg', 'configs/vision_llama/upernet_vision-llama-nano-p8_1xb8-400i_shapes-64x64.py',
     ['train_cfg.max_iters=4', 'train_cfg.val_interval=4']),
    ('mmdet', 'configs/vision_llama/vitdet_mask-rcnn_vision-llama-nano-p16_sfp_1xb4-36e_shapes-128px.py',
     ['train_cfg.max_iters=4', 'train_cfg.val_interval=4']),
    ('mmpretrain', f'{PYRAMID}/pyramid-vision-llama-nano_1xb32-60e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmseg', f'{PYRAMID}/upernet_pyramid-vision-llama-nano_1xb8-800i_shapes-64x64.py',
     ['train_cfg.max_iters=10', 'train_cfg.val_interval=10']),
    ('mmdet', f'{PYRAMID}/mask-rcnn_pyramid-vision-llama-nano_fpn_1xb4-36e_shapes-128px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmpretrain', 'configs/defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmdet', 'configs/defocus/dino-4scale_defocus-mamba-nano-p8_sfp_1xb4-45e_shapes-128px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmpretrain', 'configs/cait/cait-nano-p16_1xb64-150e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmseg', 'configs/cait/upernet_cait-nano-p8_1xb8-250i_shapes-64x64.py',
     ['train_cfg.max_iters=10', 'train_cfg.val_interval=10']),
    # a generator (an untrained autoencoder's latents: the pipeline, not what it learns)
    ('mmpretrain', 'configs/sit_llama/sit-llama-nano-p2_1xb32-2ki_shapes-32px.py',
     ['train_cfg.max_iters=4', 'model.autoencoder.checkpoint=None',
      'train_dataloader.dataset.data_root=SHAPES/imagenet']),
])
def test_upstream_train_tools_run_our_configs(shapes_root, tmp_path, library, config, options):
    kind = {'mmpretrain': 'imagenet', 'mmseg': 'ade20k', 'mmdet': 'coco'}[library]
    tool = SITE / library / '.mim' / 'tools' / 'train.py'
    data = [] if any('SHAPES' in option for option in options) else data_options(shapes_root, kind)
    options = [option.replace('SHAPES', str(shapes_root)) for option in options]
    # a stock tool in a fresh interpreter, as users run it: it imports mmcausal through the config's custom_imports
    # after its own imports (tests/zygote.py would have imported the third-party packages first)
    run_command([sys.executable, str(tool), config, '--work-dir', str(tmp_path), '--cfg-options', *options, *data],
                MMCAUSAL_TEST_FRESH_PROCESSES='1')


def _load_tool(path: str):
    """Import a script of ``tools/`` as a module, to call its functions in this process."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _benchmark_table(*arguments: str) -> List[Dict[str, str]]:
    """Run tools/analysis_tools/benchmark.py; its Markdown table as one dict per row (keys: the header)."""
    result = run_python([sys.executable, 'tools/analysis_tools/benchmark.py', *arguments], cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    header, _, *rows = (line.strip('|').split('|') for line in result.stdout.strip().splitlines())
    return [{name.strip(): value.strip() for name, value in zip(header, row)} for row in rows]


def test_benchmark_tool_measures_what_backward_keeps_linear_in_the_tokens():
    """ViTDet's global blocks go through SDPA: 4x the tokens keep at most ~4x the activations for backward (an
    explicit N x N attention would keep ~16x in those blocks); sizes may be HxW."""
    config = 'configs/vision_llama/vitdet_mask-rcnn_vision-llama-nano-p16_sfp_1xb4-36e_shapes-128px.py'
    rows = _benchmark_table(config, '--sizes', '64', '64x256', '--backbone-only', '--train', '--repeats', '1')
    assert [row['size'] for row in rows] == ['64', '64x256']
    small, large = (float(row['saved MiB']) for row in rows)
    assert 3. < large / small < 4.5, rows


def test_benchmark_tool_puts_configs_side_by_side_each_in_its_own_process():
    """Two configs, two interleaved rounds: one row per case with the median step time inside its range."""
    cait = 'configs/cait/cait-nano-p16_1xb64-150e_shapes-64px.py'
    rows = _benchmark_table(cait, f'{cait}+model.backbone.attn_impl=explicit', '--sizes', '64', '--backbone-only',
                            '--train', '--repeats', '1', '--rounds', '2')
    assert [row['config'] for row in rows] == [f'`{cait}`', f'`{cait}+model.backbone.attn_impl=explicit`']
    for row in rows:
        fastest, slowest = (float(ms) for ms in row['ms range'].split('-'))
        assert fastest <= float(row['ms / step']) <= slowest
    assert rows[0]['params (M)'] == rows[1]['params (M)']  # same parameters: only the attention path differs
    assert float(rows[0]['time x']) == 1.0 and float(rows[0]['saved x']) == 1.0
    # the second row's time ratio to the first, from the printed speeds (images/s: the same batch over each step
    # time), within the rounding of the three columns (0.005 each)
    speed, other_speed = (float(row['images/s']) for row in rows)
    time_ratio = speed / other_speed
    assert float(rows[1]['time x']) == pytest.approx(time_ratio, abs=0.005 + 0.005 * (1 + time_ratio) / other_speed)
    assert all(float(row['peak MiB']) > 0 and float(row['images/s']) > 0 and float(row['saved MiB']) > 0
               for row in rows)


def test_benchmark_measures_a_generation_config_by_its_diffusion_network(monkeypatch):
    """A DiT / SiT config: ``--backbone-only`` times ``network(x, t, y)`` on random latents of the given grid with
    timesteps and labels in range (the whole model is refused in one line: it has no image forward)."""
    from mmcausal.models import DiffusionTransformer
    benchmark = _load_tool('tools/analysis_tools/benchmark.py')
    twin = 'configs/dit_llama/dit-llama-nano-p2_1xb32-2ki_shapes-32px.py'
    seen = []
    forward = DiffusionTransformer.forward

    def record(self, x, t, y):
        out = forward(self, x, t, y)
        seen.append((tuple(x.shape), bool(0 <= t.min() and t.max() < 1000), bool(y.max() < self.num_classes),
                     tuple(out.shape)))
        return out

    monkeypatch.setattr(DiffusionTransformer, 'forward', record)
    for block in ('llama', 'dit'):
        row = benchmark.measure(f'{twin}+model.network.block={block}', '6x10', 2, 1, backbone_only=True, train=True,
                                device='cpu')
        assert row['params'] > 0 and row['saved_mib'] > 0
    assert seen and all(case == ((2, 4, 6, 10), True, True, (2, 4, 6, 10)) for case in seen)
    with pytest.raises(SystemExit, match='add --backbone-only'):
        benchmark.measure(twin, '8', 2, 1, backbone_only=False, train=True, device='cpu')


def test_benchmark_times_a_generation_config_s_sampler(monkeypatch):
    """Without ``--backbone-only`` a DiT / SiT config times its sampler: a step samples the batch's latents of the
    given grid with the config's preset (here DDIM with guidance, its steps set to 3 through the spec): 3 network
    calls per step on the doubled batch."""
    from mmcausal.models import DiffusionTransformer
    benchmark = _load_tool('tools/analysis_tools/benchmark.py')
    seen = []
    forward = DiffusionTransformer.forward

    def record(self, x, t, y):
        seen.append(tuple(x.shape))
        return forward(self, x, t, y)

    monkeypatch.setattr(DiffusionTransformer, 'forward', record)
    twin = 'configs/dit_llama/dit-llama-nano-p2_1xb32-2ki_shapes-32px.py'
    row = benchmark.measure(f'{twin}+model.test_cfg.num_steps=3', '6x4', 2, 1, backbone_only=False, train=False,
                            device='cpu')
    assert seen == [(4, 4, 6, 4)] * 6  # (warm-up + 1 timed step) x 3 steps, guided: 2 x batch 2
    assert row['images_per_s'] > 0 and row['params'] > 0


def test_benchmark_amp_runs_the_step_in_bfloat16():
    """``--amp``: the timed step runs under bf16 autocast (the attention inputs are bf16), fp32 without it."""
    benchmark = _load_tool('tools/analysis_tools/benchmark.py')
    seen = []

    def record(*args, **kwargs):
        seen.append(args[0].dtype)
        return sdpa(*args, **kwargs)

    sdpa = torch.nn.functional.scaled_dot_product_attention
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.nn.functional, 'scaled_dot_product_attention', record)
        for amp in (False, True):
            row = benchmark.measure(CLS, '64', 1, 1, backbone_only=True, train=True, device='cpu', amp=amp)
            assert row['ms'] > 0 and row['params'] > 0
    assert seen and {seen[0], seen[-1]} == {torch.float32, torch.bfloat16}


def test_benchmark_compile_times_the_compiled_model_after_its_compiling_warm_up(monkeypatch):
    """``--compile``: the case's model goes through ``torch.compile`` (here with a counting tracer instead of
    inductor), every timed step reuses the graph the warm-up step made, and the row says it was compiled."""
    import torch._dynamo.testing
    benchmark = _load_tool('tools/analysis_tools/benchmark.py')
    counter = torch._dynamo.testing.CompileCounter()
    compile_ = torch.compile
    monkeypatch.setattr(torch, 'compile', lambda model: compile_(model, backend=counter))
    torch._dynamo.reset()
    try:
        row = benchmark.measure(CLS, '64', 1, 2, backbone_only=True, train=True, device='cpu', compile=True)
    finally:
        torch._dynamo.reset()
    assert counter.frame_count == 1 and row['spec'] == f'{CLS} (compiled)'
    assert row['ms'] > 0 and row['first_step_s'] > 0 and row['saved_mib'] > 0


def test_benchmark_compile_puts_each_compiled_case_below_its_eager_case():
    """The command line with ``--compile``: one eager and one compiled row per config, in that order, with the
    first (compiling) step's time; torch.compile is switched off in the children (TORCHDYNAMO_DISABLE) to keep
    this fast, which the test above does not need."""
    result = run_python([sys.executable, 'tools/analysis_tools/benchmark.py', CLS, '--sizes', '64',
                         '--backbone-only', '--repeats', '1', '--compile'], cwd=ROOT, timeout=600,
                        env={**os.environ, 'TORCHDYNAMO_DISABLE': '1'})
    assert result.returncode == 0, result.stderr[-2000:]
    header, _, *rows = (line.strip('|').split('|') for line in result.stdout.strip().splitlines())
    rows = [{name.strip(): value.strip() for name, value in zip(header, row)} for row in rows]
    assert [row['config'] for row in rows] == [f'`{CLS}`', f'`{CLS} (compiled)`']
    assert all(float(row['first step s']) >= 0 and float(row['ms / step']) > 0 for row in rows)


def test_benchmark_onnxruntime_times_the_exported_model_in_onnx_runtime(tmp_path, monkeypatch):
    """``--onnxruntime``: the case's model is exported once (kept in the folder), in a process of its own (so the
    export's memory is not the case's peak), and every step is a run of the ONNX Runtime session (the warm-up and
    each repeat), not of the PyTorch model."""
    onnxruntime = pytest.importorskip('onnxruntime')
    from mmcausal.analysis import benchmark
    monkeypatch.setattr(benchmark, 'export_for_onnxruntime', lambda *args: pytest.fail('exported in this process'))
    runs = []
    run = onnxruntime.InferenceSession.run
    monkeypatch.setattr(onnxruntime.InferenceSession, 'run',
                        lambda session, *args, **kwargs: runs.append(1) or run(session, *args, **kwargs))
    row = benchmark.measure(CLS, '64', 2, 2, backbone_only=True, train=False, device='cpu', onnxruntime=True,
                            onnx_dir=str(tmp_path))
    assert row['spec'] == f'{CLS} (onnxruntime)' and row['batch'] == 2 and row['ms'] > 0
    assert len(runs) == 3 and len(list(tmp_path.glob('*.onnx'))) == 1


def test_benchmark_table_compares_each_batch_with_its_own_first_row():
    """Several ``--batch`` sizes: a batch column, and the ratios are to the first config at the same size and
    batch."""
    benchmark = _load_tool('tools/analysis_tools/benchmark.py')
    rows = [dict(spec=spec, size='64', batch=batch, params=1e6, images_per_s=batch * 1e3 / ms, ms=ms,
                 first_step_s=0.1, peak_mib=10., activation_mib=5.)
            for batch, spec, ms in [(1, 'a', 10.), (1, 'a (onnxruntime)', 5.), (8, 'a', 40.),
                                    (8, 'a (onnxruntime)', 60.)]]
    header, _, *lines = (line.strip('|').split('|') for line in benchmark.table(rows).splitlines())
    table = [{name.strip(): value.strip() for name, value in zip(header, line)} for line in lines]
    assert [row['batch'] for row in table] == ['1', '1', '8', '8']
    assert [row['time x'] for row in table] == ['1.00', '0.50', '1.00', '1.50']


def test_scan_benchmark_puts_scans_side_by_side_with_equal_checksums():
    """Three scans, each in its own process: a row per scan, and the same output checksum (same seeded inputs, same
    recurrence)."""
    result = run_python([sys.executable, 'tools/analysis_tools/benchmark_scan.py', '--impls', 'sequential',
                         'chunked', 'cpu_kernel', '--shapes', '2x9x4', '--repeats', '1'], cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.strip('|').split('|') for line in result.stdout.strip().splitlines()[2:]]
    assert [(row[1].strip(), row[2].strip()) for row in rows] == [('sequential', '-'), ('chunked', 'auto'),
                                                                  ('cpu_kernel', '-')]
    checksums = [float(row[3].split(', ')[2]) for row in rows]
    assert checksums[1:] == pytest.approx(checksums[:1] * 2, rel=1e-5)


def test_scan_benchmark_summarises_rounds_as_median_range_and_out_of_memory():
    tool = _load_tool('tools/analysis_tools/benchmark_scan.py')
    runs = [dict(time=t, peak_mib=m, checksum=1.5) for t, m in ((0.3, 10.), (0.1, 30.), (0.2, 20.))]
    assert tool.summarise(runs) == '0.200 s (0.100-0.300), 20 MiB, 1.5'
    assert tool.summarise(runs[:1]) == '0.300 s, 10 MiB, 1.5'
    assert tool.summarise([runs[0], dict(out_of_memory=True)]) == 'out of memory'


def test_scan_benchmark_reports_a_case_over_its_memory_cap_as_out_of_memory():
    result = run_python([sys.executable, 'tools/analysis_tools/benchmark_scan.py', '--impls', 'chunked',
                         '--shapes', '2x1025x256', '--repeats', '1', '--memory-limit-gib', '0.01'], cwd=ROOT,
                        timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == '| 2x1025x256 | chunked | auto | out of memory |'


def test_benchmark_tools_refuse_bad_options_in_one_line(monkeypatch):
    """A scan memory cap that is not positive, a GPU scan on the CPU (or the CPU kernel on a GPU), timm keyword
    arguments without a value and an unknown timm model (timm stubbed) stop with one line that says what to change."""
    scan = _load_tool('tools/analysis_tools/benchmark_scan.py')
    for options in (['--memory-limit-gib', '0'], ['--impls', 'triton'], ['--device', 'cuda', '--impls', 'cpu_kernel']):
        with pytest.raises(SystemExit):
            scan.parse_args(options)
    from mmcausal.analysis import benchmark_models as benchmark

    def create_model(name, pretrained, **kwargs):
        raise RuntimeError(f'Unknown model ({name})')

    monkeypatch.setitem(sys.modules, 'timm', type(sys)('timm'))
    monkeypatch.setattr(sys.modules['timm'], 'create_model', create_model, raising=False)
    for spec, expected in (('timm::resnet18+drop_path_rate', r'\+key=value'), ('timm::resnet1', 'has no model')):
        with pytest.raises(SystemExit, match=expected) as exit_info:
            benchmark.build_model(spec, backbone_only=True)
        assert '\n' not in str(exit_info.value)


def test_benchmark_runs_a_timm_model_beside_a_config():
    """A ``timm::`` spec is timm's model (here stubbed: timm is optional) built with the spec's keyword arguments,
    ``num_classes=0`` with ``--backbone-only``, called as a classifier is."""
    from mmcausal.analysis import benchmark_models as benchmark
    created = []

    def create_model(name, pretrained, **kwargs):
        created.append((name, pretrained, kwargs))
        return torch.nn.Linear(3, 2)

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, 'timm', type(sys)('timm'))
        patch.setattr(sys.modules['timm'], 'create_model', create_model, raising=False)
        model = benchmark.build_model('timm::cait_s24_224+drop_path_rate=0.1', backbone_only=True)
        assert model(torch.ones(4, 3), mode='tensor').shape == (4, 2)
        benchmark.build_model('timm::cait_s24_384', backbone_only=False)
    assert created == [('cait_s24_224', False, dict(drop_path_rate=0.1, num_classes=0)), ('cait_s24_384', False, {})]


def test_attention_benchmark_divides_every_row_by_the_bidirectional_row(monkeypatch, capsys):
    """``x bidir`` is each row's time over the bidirectional row's at the same length, wherever that case stands in
    ``--cases`` (it is timed first), and ``-`` without it; repeated cases are timed once; a bad case is refused."""
    tool = _load_tool('tools/analysis_tools/benchmark_attention.py')
    ms_per_token = {('bidirectional', 0.): 8., ('causal', 0.): 5., ('official', 0.5): 20.}
    timed = []

    def fake_measure(mode, alpha, shape, device, dtype, repeats):
        timed.append((shape[2], mode, alpha))
        return dict(ms=ms_per_token[mode, alpha] * shape[2])

    monkeypatch.setattr(tool, 'measure', fake_measure)

    def table(*arguments: str) -> List[List[str]]:
        tool.main(['--device', 'cpu', *arguments])
        return [line.split() for line in capsys.readouterr().out.splitlines()[2:]]

    rows = table('--tokens', '2', '3', '--cases', 'causal', 'bidirectional:0.5', 'official:0.5', 'causal:0')
    assert timed == [(tokens, *case) for tokens in (2, 3)
                     for case in (('bidirectional', 0.), ('causal', 0.), ('official', 0.5))]
    assert rows == [[str(tokens), mode, alpha, f'{per_token * tokens:.1f}', ratio] for tokens in (2, 3)
                    for mode, alpha, per_token, ratio in (('causal', '0.00', 5., '0.625'),
                                                          ('bidirectional', '0.00', 8., '1.000'),
                                                          ('official', '0.50', 20., '2.500'))]
    assert [row[4] for row in table('--tokens', '2', '--cases', 'causal', 'official:0.5')] == ['-', '-']
    for bad in ('sliding', 'causal:1.5', 'causal:x', 'official:nan'):
        with pytest.raises(SystemExit):
            tool.main(['--cases', bad])
        assert '--cases' in capsys.readouterr().err


def test_attention_benchmark_runs_the_real_kernels(monkeypatch, capsys):
    """One real run on CPU (the real kernels, timed): the rows come in the order asked, each case is timed once per
    length, a row's ``ms`` is the time measured for its case and its ``x bidir`` that time over the time measured for
    the bidirectional case at the same length (computed here from the recorded times)."""
    tool = _load_tool('tools/analysis_tools/benchmark_attention.py')
    measured = []
    measure = tool.measure

    def record(mode, alpha, shape, *args):
        row = measure(mode, alpha, shape, *args)
        measured.append(((shape[2], mode, alpha), row['ms']))
        return row

    monkeypatch.setattr(tool, 'measure', record)
    tool.main(['--device', 'cpu', '--tokens', '16', '40', '--batch', '1', '--heads', '2', '--head-dim', '8',
               '--repeats', '1', '--cases', 'causal:0.5', 'bidirectional', 'official:0.5'])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[:3] for row in rows] == [[tokens, mode, alpha] for tokens in ('16', '40') for mode, alpha in
                                         (('causal', '0.50'), ('bidirectional', '0.00'), ('official', '0.50'))]
    ms = dict(measured)
    assert len(ms) == len(measured) == 6
    for tokens, mode, alpha, printed_ms, ratio in rows:
        own, bidirectional = ms[int(tokens), mode, float(alpha)], ms[int(tokens), 'bidirectional', 0.]
        assert (printed_ms, ratio) == (f'{own:.1f}', f'{own / bidirectional:.3f}'), (tokens, mode, ms)
