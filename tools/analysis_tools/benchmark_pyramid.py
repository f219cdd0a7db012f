"""Pyramid VisionLLaMA vs the stock Twins-SVT of mmpretrain: backbone forward + backward time and peak memory.

    python tools/analysis_tools/benchmark_pyramid.py --arch base --sizes 512x512 800x1216 --repeats 3

Same stage widths, depths, heads, windows and sr ratios, same input, fp32, one image. Each (model, size) runs in
a fresh process: time is the median of ``--repeats`` forward + backward passes after one warm-up; peak memory is the
process's peak resident set (CPU, allocator-dependent, varies by 5-10 % between runs) or
``torch.cuda.max_memory_allocated`` (CUDA) above what the built model holds; "saved" is the exact size of the
activations kept for backward (distinct storages reached by autograd's saved-tensor hooks, parameters excluded).
Extra work of the pyramid VisionLLaMA: the RoPE rotation, SwiGLU's gate and LayerScale (Twins' PEG convolution is
absent).
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def measure(model_name: str, arch: str, size: tuple, repeats: int, device: str) -> dict:
    import torch

    import mmcausal  # noqa: F401  (registers PyramidVisionLLaMA)
    from mmcausal.registry import MODELS
    if model_name == 'twins-svt':
        cfg = dict(type='mmpretrain.SVT', arch=arch, out_indices=(0, 1, 2, 3), norm_after_stage=True)
    else:
        cfg = dict(type='PyramidVisionLLaMA', arch=arch, out_indices=(0, 1, 2, 3))
    model = MODELS.build(cfg).to(device).train()
    images = torch.randn(1, 3, *size, device=device)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if device == 'cuda':
        torch.cuda.reset_peak_memory_stats()
        base_cuda = torch.cuda.memory_allocated()
    times = []
    for step in range(repeats + 1):
        start = time.perf_counter()
        sum(out.float().square().mean() for out in model(images)).backward()
        if device == 'cuda':
            torch.cuda.synchronize()
        if step:
            times.append(time.perf_counter() - start)
        model.zero_grad(set_to_none=True)
    if device == 'cuda':
        memory_mb = (torch.cuda.max_memory_allocated() - base_cuda) / 2**20
    else:
        memory_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss) / 1024
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def record(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    # after the timed passes, so that this extra forward's graph leaves the peak above untouched
    with torch.autograd.graph.saved_tensors_hooks(record, lambda tensor: tensor):
        model(images)
    return dict(model=model_name, size=f'{size[0]}x{size[1]}', seconds=statistics.median(times), memory_mb=memory_mb,
                saved_mb=sum(saved.values()) / 2**20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--arch', default='base', choices=['small', 'base', 'large'])
    parser.add_argument('--sizes', nargs='+', default=['512x512', '800x1216'])
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--one', help=argparse.SUPPRESS)  # internal: MODEL,HxW, run in a child process
    args = parser.parse_args()
    if args.one:
        model_name, size = args.one.split(',')
        height, width = (int(side) for side in size.split('x'))
        print(json.dumps(measure(model_name, args.arch, (height, width), args.repeats, args.device)))
        return
    rows = []
    for size in args.sizes:
        for model_name in ('twins-svt', 'pyramid-vision-llama'):
            result = subprocess.run([sys.executable, __file__, '--arch', args.arch, '--repeats', str(args.repeats),
                                     '--device', args.device, '--one', f'{model_name},{size}'],
                                    capture_output=True, text=True, check=True)
            rows.append(json.loads(result.stdout.strip().splitlines()[-1]))
    print(f'| size | model ({args.arch}) | fwd+bwd (s) | peak memory (MiB) | saved for backward (MiB) | time / Twins '
          '| peak / Twins | saved / Twins |')
    print('|---|---|---|---|---|---|---|---|')
    for twins, ours in zip(rows[0::2], rows[1::2]):
        for row in (twins, ours):
            print(f'| {row["size"]} | {row["model"]} | {row["seconds"]:.2f} | {row["memory_mb"]:.0f} | '
                  f'{row["saved_mb"]:.0f} | {row["seconds"] / twins["seconds"]:.2f} | '
                  f'{row["memory_mb"] / twins["memory_mb"]:.2f} | {row["saved_mb"] / twins["saved_mb"]:.2f} |')


if __name__ == '__main__':
    main()
