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
autoencoder's decoding, so images/s is samples/s. DiT-LLaMA-B/4 beside DiT-B/4::

    python tools/analysis_tools/benchmark.py configs/dit_llama/dit-base-p4_8xb32-400k_in1k-256px.py \
        configs/dit_llama/dit-llama-base-p4_8xb32-400k_in1k-256px.py --sizes 32 --backbone-only --train

ONNX Runtime against eager and compiled PyTorch (batch 1 and 8, interleaved rounds)::

    python tools/analysis_tools/benchmark.py configs/illama/illama-small-p16_32xb128_in1k.py --sizes 224 \\
        --batch 1 8 --compile --onnxruntime --rounds 3
"""
import argparse
import json
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

from mmcausal.analysis.benchmark import measure
from mmcausal.analysis.benchmark_models import parse_size
from mmcausal.analysis.benchmark_table import median_of_rounds, table


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
    if args.single:  # one case, in the fresh process the loop below starts for it: its row as JSON
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
