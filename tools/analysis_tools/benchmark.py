"""Time and memory of one or more configs' models side by side, every case in a fresh process (CPU or CUDA).

    python tools/analysis_tools/benchmark.py CONFIG [CONFIG ...] [--sizes 224 512 800x1216] [--batch 1 [8 ...]]
        [--repeats 3] [--rounds 1] [--backbone-only] [--train] [--amp] [--compile] [--onnxruntime]
        [--device cpu|cuda]

A CONFIG is a file, an upstream config (``mmpretrain::deit/deit-small_4xb256_in1k.py``) or either with overrides
after ``+`` (``configs/cait/cait-s24_8xb128-400e_in1k.py+model.backbone.attn_impl=explicit``), or a timm model
(``timm::cait_s24_224+drop_path_rate=0.1``: ``timm.create_model`` with those keyword arguments; ``pip install
timm``). Each (config, size) case builds the model (``--backbone-only``: just ``model.backbone``) from random
weights, runs one warm-up step and ``--repeats`` timed steps on random ``(batch, 3, H, W)`` images (a size is ``S``
or ``HxW``): a forward (inference, no grad) or, with ``--train``, a training-mode forward + backward of the summed
mean squares of the outputs. Reported: images/s, peak memory (the process's peak RSS on CPU,
``max_memory_allocated`` on CUDA), the part of it above the built model ("activation": activations and temporaries,
and with ``--train`` the gradients; RSS depends on the allocator, expect 5-10 % between runs), with ``--train`` the
exact size of what autograd keeps for backward ("saved": distinct storages reached by saved-tensor hooks, parameters
excluded, but with ``--amp`` the bf16 copies autocast makes of them included; measured on an extra forward after the
timed steps) and the parameter count, with ratios to the first config at the same size, as a Markdown table.
``--amp`` runs every step under ``torch.autocast`` in bfloat16 (what the AMP configs train in on GPUs: SDPA then
takes the flash / memory-efficient kernels; bf16 needs no loss scaling); without it everything is fp32. ``--rounds
R`` measures every case R times, round-robin over the cases (each run a fresh process), and reports the median of
the rounds with the range of the step time: on a shared or thermally throttled CPU the speed drifts by several
percent over minutes, and interleaved rounds see the same drift in every config. ``--compile`` measures every case a
second time with the model under ``torch.compile`` (default backend: inductor), in the row below it (``first step
s``: the warm-up step, which compiles, then the timed steps reuse the graphs). ``--onnxruntime`` (inference on the
CPU) measures every case a third way: the model exported to ONNX (``tools/deployment/pytorch2onnx.py``'s export at
the case's fixed shape, once per case into a temporary folder, in a process of its own: outside the timing and the
memory) and run by ONNX Runtime with as
many intra-op threads as torch uses, in the row below the compiled one (``first step s``: the first run of the
session). ``--batch`` takes several sizes: every case at each. Example (the CaiT README's table)::

    python tools/analysis_tools/benchmark.py configs/cait/cait-s24_8xb128-400e_in1k.py \\
        configs/cait/cait-s24_8xb128-400e_in1k.py+model.backbone.attn_impl=explicit \\
        mmpretrain::deit/deit-small_4xb256_in1k.py --sizes 224 512 --backbone-only --train

A generation config (DiT / SiT, ``configs/dit_llama``, ``configs/sit_llama``) is measured by its diffusion network
with ``--backbone-only``: ``network(x, t, y)`` on random latents whose grid is the size given (32 for 256 px images
through the SD-VAE), random timesteps and labels; without it (and without ``--train``) by its whole sampler: one
step is sampling ``--batch`` latents of that grid with the config's ``model.test_cfg`` (the official presets, e.g.
DDPM-250 with guidance on twice the batch; override with ``+model.test_cfg.num_steps=...``), without the
autoencoder's decoding, so images/s is samples/s. DiT-LLaMA-B/4 beside DiT-B/4 (issue 31, section 7)::

    python tools/analysis_tools/benchmark.py configs/dit_llama/dit-base-p4_8xb32-400k_in1k-256px.py \
        configs/dit_llama/dit-llama-base-p4_8xb32-400k_in1k-256px.py --sizes 32 --backbone-only --train

ONNX Runtime against eager and compiled PyTorch (batch 1 and 8, interleaved rounds)::

    python tools/analysis_tools/benchmark.py configs/illama/illama-small-p16_32xb128_in1k.py --sizes 224 \\
        --batch 1 8 --compile --onnxruntime --rounds 3
"""
import argparse
import hashlib
import importlib
import json
import os.path as osp
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import torch
from mmpretrain.structures import DataSample


def load_config(spec: str):
    """The config named by ``spec`` (``path[+key=value ...]``), with the overrides merged."""
    from mmengine.config import Config, DictAction
    from mmengine.hub import get_config

    name, *overrides = spec.split('+')
    cfg = get_config(name) if '::' in name else Config.fromfile(name)
    if overrides:
        options = argparse.ArgumentParser()
        options.add_argument('opts', nargs='+', action=DictAction)
        cfg.merge_from_dict(options.parse_args(overrides).opts)
    return cfg


class TimmModel(torch.nn.Module):
    """A timm model under the call of an mmpretrain classifier: ``forward(images, mode='tensor')`` -> its output."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor, mode: str = 'tensor') -> torch.Tensor:
        return self.model(images)


def build_timm_model(spec: str, backbone_only: bool) -> torch.nn.Module:
    """``timm::NAME[+key=value ...]``: ``timm.create_model(NAME, pretrained=False, key=value, ...)`` (an independent
    implementation to measure beside ours); ``backbone_only``: without the classifier (``num_classes=0``, so a
    CaiT ends at its normed class feature, as our ``CaiT`` backbone with ``out_type='cls_token'``)."""
    try:
        import timm  # optional (requirements/optional.txt): only for these specs
    except ImportError:
        raise SystemExit(f'{spec} needs timm: pip install -r requirements/optional.txt') from None
    from mmengine.config import DictAction

    name, *overrides = spec[len('timm::'):].split('+')
    if not all('=' in override for override in overrides):
        raise SystemExit(f'{spec}: write each timm keyword argument as +key=value.')
    options = argparse.ArgumentParser()
    options.add_argument('opts', nargs='*', action=DictAction, default={})
    kwargs = dict(options.parse_args(overrides).opts, **(dict(num_classes=0) if backbone_only else {}))
    try:
        return TimmModel(timm.create_model(name, pretrained=False, **kwargs))
    except RuntimeError as error:
        if 'Unknown model' not in str(error):
            raise
        raise SystemExit(f'{spec}: timm has no model {name!r} (timm.list_models() lists them).') from None


def build_model(spec: str, backbone_only: bool) -> torch.nn.Module:
    """``model`` (or ``model.backbone``) of the config, randomly initialised (no pretrained weights loaded); a
    ``timm::`` spec builds that timm model (:func:`build_timm_model`)."""
    from mmengine.registry import init_default_scope

    if spec.startswith('timm::'):
        return build_timm_model(spec, backbone_only)
    import mmcausal  # noqa: F401  (registers the components)
    cfg = load_config(spec)
    scope = cfg.get('default_scope', 'mmpretrain')
    init_default_scope(scope)
    models = importlib.import_module(f'{scope}.registry').MODELS  # the library's registry (it sees mmcausal's)
    if 'network' in cfg.model:  # a generation config (DiT / SiT): its diffusion network, or the whole sampler
        return models.build(cfg.model.network if backbone_only else cfg.model)
    model_cfg = cfg.model.backbone if backbone_only else cfg.model
    model_cfg.pop('init_cfg', None)
    if not backbone_only:
        model_cfg.backbone.pop('init_cfg', None)
    return models.build(model_cfg)


def is_diffusion_network(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a class-conditional diffusion network, called as ``model(x, t, y)``."""
    return hasattr(model, 'forward_with_cfg')


def is_generator(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a whole class-conditional generator (network, objective, sampler preset)."""
    return hasattr(model, 'sample_latents')


def example_inputs(model: torch.nn.Module, batch: int, size: Tuple[int, int], device: str) -> tuple:
    """Random ``(batch, 3, H, W)`` images; for a diffusion network random latents ``(batch, C, H, W)`` (``size`` is
    then the latent grid: 32 for 256 px images through the SD-VAE), timesteps in ``[0, 1000)`` (DDPM's; a SiT network
    reads ``t`` in ``[0, 1]``, which changes no cost) and labels; for a generator no images and ``batch`` data samples
    with balanced labels (it samples latents of the grid ``size``: its ``test_cfg.latent_size`` is set to it)."""
    if is_generator(model):
        model.test_cfg['latent_size'] = size
        classes = model.network.num_classes
        return None, [DataSample(metainfo=dict(sample_idx=index)).set_gt_label(index % classes)
                      for index in range(batch)]
    if not is_diffusion_network(model):
        return (torch.randn(batch, 3, *size, device=device), )
    return (torch.randn(batch, model.in_channels, *size, device=device),
            torch.randint(0, 1000, (batch, ), device=device),
            torch.randint(0, model.num_classes, (batch, ), device=device))


def _outputs(model: torch.nn.Module, inputs: Tuple[torch.Tensor, ...], backbone_only: bool):
    outs = model(*inputs) if backbone_only else model(*inputs, mode='tensor')
    return outs if isinstance(outs, (tuple, list)) else (outs, )


def saved_for_backward(model: torch.nn.Module, forward) -> int:
    """Bytes of the distinct non-parameter storages autograd keeps for the backward of ``forward()``."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: Dict[int, int] = {}

    def record(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(record, lambda tensor: tensor):
        forward()
    return sum(saved.values())


def parse_size(text: str) -> Tuple[int, int]:
    """``'224'`` -> ``(224, 224)``; ``'800x1216'`` -> ``(800, 1216)`` (H x W)."""
    parts = text.lower().split('x')
    if len(parts) > 2 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f'sizes are S or HxW with positive integers, got {text!r}')
    return int(parts[0]), int(parts[-1])


def export_for_onnxruntime(module: torch.nn.Module, shape: Tuple[int, ...], backbone_only: bool, onnx_path: str):
    """Export ``module`` (a whole model, or a backbone with ``backbone_only``) at the fixed input ``shape``."""
    from mmcausal.deployment import TensorOutputs, export_onnx, exportable_part
    part = TensorOutputs(module, 'module') if backbone_only else exportable_part(module)
    export_onnx(part.eval(), onnx_path, shape, check=False)


def onnxruntime_step(images: torch.Tensor, onnx_path: str):
    """A step that runs the exported file ``onnx_path`` in ONNX Runtime on ``images``, with torch's number of
    intra-op threads."""
    import onnxruntime

    from mmcausal.deployment import INPUT_NAME
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = onnxruntime.InferenceSession(onnx_path, options, providers=['CPUExecutionProvider'])
    feed = {INPUT_NAME: images.numpy()}
    return lambda: session.run(None, feed)


def measure(spec: str, size: str, batch: int, repeats: int, backbone_only: bool, train: bool, device: str,
            amp: bool = False, compile: bool = False, onnxruntime: bool = False,
            onnx_dir: Optional[str] = None) -> dict:
    """One case (see the module docstring); ``size`` is ``S`` or ``HxW``; ``compile``: under ``torch.compile``;
    ``onnxruntime``: exported and run by ONNX Runtime (inference on the CPU), the file kept in ``onnx_dir``."""
    torch.manual_seed(0)
    module = build_model(spec, backbone_only).to(device)
    module.train(train)  # not chained: some upstream backbones' train() returns None
    params = sum(p.numel() for p in module.parameters())
    model = torch.compile(module) if compile else module
    inputs = example_inputs(module, batch, parse_size(size), device)
    images = inputs[0]
    if onnxruntime and (is_diffusion_network(module) or is_generator(module)):
        raise SystemExit(f'{spec}: --onnxruntime measures image models; export a diffusion network with '
                         'tools/deployment/pytorch2onnx.py --network.')
    if train and is_generator(module):
        raise SystemExit(f'{spec}: a generation config trains its diffusion network: add --backbone-only to time '
                         'that (without --train the whole model times its sampler).')
    if onnxruntime:
        key = hashlib.sha1(f'{spec}|{size}|{batch}|{backbone_only}'.encode()).hexdigest()[:16]
        onnx_path = osp.join(onnx_dir or tempfile.gettempdir(), f'{key}.onnx')
        if not osp.isfile(onnx_path):  # exported in a process of its own: its memory is not this case's
            subprocess.run([sys.executable, __file__, spec, '--single', '--sizes', size, '--batch', str(batch),
                            *(['--backbone-only'] if backbone_only else []), '--export-onnx', onnx_path], check=True)
        run_session = onnxruntime_step(images, onnx_path)

    def step() -> None:
        if onnxruntime:
            run_session()
            return
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            if train:
                sum(out.float().square().mean() for out in _outputs(model, inputs, backbone_only)).backward()
                module.zero_grad(set_to_none=True)
            else:
                with torch.no_grad():
                    _outputs(model, inputs, backbone_only)
        if device == 'cuda':
            torch.cuda.synchronize()

    if device == 'cuda':
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    step()  # warm-up (and compilation); its peak is the peak of every step
    first_step = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if device == 'cuda' else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    label = f'{spec} (onnxruntime)' if onnxruntime else f'{spec} (compiled)' if compile else spec
    row = dict(spec=label, size=size, batch=batch, params=params,
               images_per_s=batch / seconds, ms=seconds * 1e3, first_step_s=first_step, peak_mib=peak / 2**20,
               activation_mib=(peak - before) / 2**20)
    if train:  # after the timed steps: this forward's graph leaves the peak above untouched
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            row['saved_mib'] = saved_for_backward(module, lambda: _outputs(model, inputs, backbone_only)) / 2**20
    return row


def median_of_rounds(runs: List[dict]) -> dict:
    """One case's rows from several rounds -> one row: the median of every measurement (images/s from the median
    step time), and the step time's range (``ms_min``, ``ms_max``)."""
    row = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, float):
            row[key] = statistics.median(run[key] for run in runs)
    row['images_per_s'] = row['batch'] * 1e3 / row['ms']
    row.update(rounds=len(runs), ms_min=min(run['ms'] for run in runs), ms_max=max(run['ms'] for run in runs))
    return row


def table(rows: List[dict]) -> str:
    """Markdown: one line per case, ratios to the first config at the same size and batch."""
    firsts: Dict[Tuple[str, int], dict] = {}
    saved = 'saved_mib' in rows[0]
    spread = any(row.get('rounds', 1) > 1 for row in rows)
    compiled = any(row['spec'].endswith((' (compiled)', ' (onnxruntime)')) for row in rows)
    batches = len({row['batch'] for row in rows}) > 1
    lines = ['| config | size | ' + ('batch | ' if batches else '') + 'params (M) | images/s | ms / step | '
             + ('ms range | ' if spread else '')
             + ('first step s | ' if compiled else '')
             + 'peak MiB | activation MiB | ' + ('saved MiB | ' if saved else '') + 'time x | activation x |'
             + (' saved x |' if saved else ''),
             '|---' * (9 + 2 * saved + spread + compiled + batches) + '|']
    for row in rows:
        first = firsts.setdefault((row['size'], row['batch']), row)
        activation_ratio = row['activation_mib'] / max(first['activation_mib'], 1e-9)
        line = (f'| `{row["spec"]}` | {row["size"]} | ' + (f'{row["batch"]} | ' if batches else '')
                + f'{row["params"] / 1e6:.2f} | {row["images_per_s"]:.2f} | '
                f'{row["ms"]:.0f} | ' + (f'{row["ms_min"]:.0f}-{row["ms_max"]:.0f} | ' if spread else '')
                + (f'{row["first_step_s"]:.1f} | ' if compiled else '')
                + f'{row["peak_mib"]:.0f} | {row["activation_mib"]:.0f} | ')
        line += f'{row["saved_mib"]:.1f} | ' if saved else ''
        line += f'{row["ms"] / first["ms"]:.2f} | {activation_ratio:.2f} |'
        line += f' {row["saved_mib"] / first["saved_mib"]:.2f} |' if saved else ''
        lines.append(line)
    return '\n'.join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('configs', nargs='+', help='config files / mmpretrain:: names, optionally +key=value ...')
    parser.add_argument('--sizes', nargs='+', default=['224'], help='input sizes: S (square) or HxW, pixels')
    parser.add_argument('--batch', type=int, nargs='+', default=[1], help='batch sizes (every case at each)')
    parser.add_argument('--repeats', type=int, default=3, help='timed steps after one warm-up (median reported)')
    parser.add_argument('--rounds', type=int, default=1,
                        help='measure every case this many times, round-robin, each in a fresh process (median '
                             'and range reported)')
    parser.add_argument('--backbone-only', action='store_true', help='measure model.backbone only')
    parser.add_argument('--train', action='store_true', help='forward + backward in training mode')
    parser.add_argument('--amp', action='store_true', help='bfloat16 autocast (default: fp32)')
    parser.add_argument('--compile', action='store_true',
                        help='also measure every case under torch.compile (a row below the eager one)')
    parser.add_argument('--onnxruntime', action='store_true',
                        help='also measure every case exported to ONNX and run by ONNX Runtime (CPU inference)')
    parser.add_argument('--onnx-dir', help=argparse.SUPPRESS)  # where the children keep the exported files
    parser.add_argument('--device', default='cpu', choices=('cpu', 'cuda'))
    parser.add_argument('--single', action='store_true', help=argparse.SUPPRESS)  # one case, in a child process
    parser.add_argument('--export-onnx', help=argparse.SUPPRESS)  # with --single: export the case to this file
    args = parser.parse_args()
    for size in args.sizes:
        try:
            parse_size(size)
        except argparse.ArgumentTypeError as error:
            parser.error(str(error))
    if args.rounds < 1 or args.repeats < 1 or min(args.batch) < 1:
        parser.error('--rounds, --repeats and --batch must be at least 1')
    if args.onnxruntime and (args.train or args.amp or args.device != 'cpu'):
        parser.error('--onnxruntime measures fp32 inference on the CPU: drop --train, --amp and --device cuda')
    return args


def main() -> None:
    args = parse_args()
    flags = [*(['--backbone-only'] if args.backbone_only else []), *(['--train'] if args.train else []),
             *(['--amp'] if args.amp else [])]
    if args.single and args.export_onnx:  # the case's model exported for --onnxruntime, in a process of its own
        torch.manual_seed(0)
        module = build_model(args.configs[0], args.backbone_only)
        shape = tuple(example_inputs(module, args.batch[0], parse_size(args.sizes[0]), 'cpu')[0].shape)
        export_for_onnxruntime(module, shape, args.backbone_only, args.export_onnx)
        return
    if args.single:  # --compile / --onnxruntime: this case under torch.compile / in ONNX Runtime
        print(json.dumps(measure(args.configs[0], args.sizes[0], args.batch[0], args.repeats, args.backbone_only,
                                 args.train, args.device, args.amp, args.compile, args.onnxruntime, args.onnx_dir)))
        return
    runtimes = ['eager'] + ['compiled'] * args.compile + ['onnxruntime'] * args.onnxruntime
    cases = [((size_index, batch, index, runtime), size, spec) for size_index, size in enumerate(args.sizes)
             for batch in args.batch for index, spec in enumerate(args.configs) for runtime in runtimes]
    runs: Dict[Tuple[int, int, int, str], List[dict]] = {case: [] for case, _, _ in cases}  # a config may repeat
    failures = []
    onnx_dir = tempfile.TemporaryDirectory(prefix='benchmark-onnx-') if args.onnxruntime else None
    for completed_rounds in range(args.rounds):
        for case, size, spec in cases:
            if len(runs[case]) < completed_rounds:  # it failed in an earlier round
                continue
            runtime = case[3]
            child = subprocess.run([sys.executable, __file__, spec, '--single', '--sizes', size, '--batch',
                                    str(case[1]), '--repeats', str(args.repeats), '--device', args.device, *flags,
                                    *(['--compile'] if runtime == 'compiled' else []),
                                    *(['--onnxruntime', '--onnx-dir', onnx_dir.name] if runtime == 'onnxruntime'
                                      else [])],
                                   capture_output=True, text=True)
            if child.returncode:  # report it and go on: the other cases' measurements stay useful
                failures.append(f'Measuring {spec} ({runtime}) at {size}px, batch {case[1]} failed:\n'
                                f'{child.stderr.strip()[-2000:]}')
                print(failures[-1], file=sys.stderr)
                continue
            runs[case].append(json.loads(child.stdout.strip().splitlines()[-1]))
            print(f'measured {spec} ({runtime}) at {size}px, batch {case[1]}', file=sys.stderr)
    rows = [median_of_rounds(measured) for measured in runs.values() if measured]
    if rows:
        print(table(rows))
    if failures:
        sys.exit(f'{len(failures)} case(s) failed (above).')


if __name__ == '__main__':
    main()
