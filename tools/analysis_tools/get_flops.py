"""FLOPs of configs' models with mmengine's complexity analysis (mmpretrain's ``get_flops.py`` counting, plus SDPA
attention and our fused SwiGLU projection and RMSNorm: :mod:`mmcausal.analysis.complexity` says what is counted
for classifiers, segmentors, detectors and diffusion networks).

    python tools/analysis_tools/get_flops.py CONFIG [CONFIG ...] [--shape H [W]]
    python tools/analysis_tools/get_flops.py --update-metafiles [CONFIG ...] [--jobs N]  # all non-twin entries

One line per config: the FLOPs (multiply-adds, integer as in the metafiles, and in G) and the input ``H x W`` (by
default the config's own: its test crop, segmentation crop, test scale or latent size). ``--update-metafiles``
computes every model of ``configs/*/metafile.yml`` except the tiny CPU models (``nano``) at its config's size and
writes ``Metadata: FLOPs`` (given configs: only their entries; tests/test_analysis/test_complexity.py checks a cheap
subset against this tool). Models are built on the CPU with uninitialised weights, so the largest (DiT-XL,
VisionLLaMA-L, CaiT-M48) need a few GB of memory; all of them take about 25 minutes on 2 shared cores.
"""
import argparse
import multiprocessing
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run from anywhere: mmcausal from this checkout

from mmcausal.analysis.complexity import config_flops, config_input_size  # noqa: E402


def metafile_models(root: Path = ROOT) -> List[Tuple[Path, str, str]]:
    """``(metafile, model name, config)`` of every model of ``configs/*/metafile.yml`` that gets FLOPs: all but the
    tiny CPU models (``nano`` in the name: the twins and the generation judge)."""
    import yaml
    return [(path, model['Name'], model['Config']) for path in sorted(root.glob('configs/*/metafile.yml'))
            for model in yaml.safe_load(path.read_text())['Models'] if 'nano' not in model['Name']]


def write_flops(text: str, name: str, flops: int) -> str:
    """``text`` of a metafile with ``FLOPs: flops`` in the ``Metadata`` of model ``name`` (after ``Parameters``),
    replacing an earlier value; comments and layout stay."""
    block = re.compile(rf'(- Name: {re.escape(name)}\n(?:(?!\s*- Name: ).*\n)*?)(\s+)Parameters: (\d+)\n'
                       r'(?:\s+FLOPs: \d+\n)?')
    new, count = block.subn(lambda m: f'{m[1]}{m[2]}Parameters: {m[3]}\n{m[2]}FLOPs: {flops}\n', text, count=1)
    if count != 1:
        raise ValueError(f'{name}: no Metadata: Parameters line to put FLOPs after')
    return new


def _count(config: str, shape: Optional[Tuple[int, int]] = None) -> Tuple[int, Tuple[int, int]]:
    from mmengine.config import Config
    cfg = Config.fromfile(str(ROOT / config) if not Path(config).is_absolute() else config)
    size = shape or config_input_size(cfg)
    return config_flops(cfg, size), size


def update_metafiles(jobs: int, only: Sequence[str] = ()) -> None:
    """Compute every non-twin metafile model's FLOPs (``only``: of these configs) and write them into the metafiles.
    Each config is counted in a fresh child process (forked after the imports): a large model's memory is returned
    when it ends."""
    import mmcausal  # noqa: F401  (imported once, before the children fork)
    models = [model for model in metafile_models() if not only or model[2] in only]
    configs = sorted({config for _, _, config in models})
    counted: Dict[str, Tuple[int, Tuple[int, int]]] = {}
    with multiprocessing.get_context('fork').Pool(jobs, maxtasksperchild=1) as pool:
        for config, result in zip(configs, pool.imap(_count, configs)):
            counted[config] = result
            print(f'{config}: {result[0]} ({result[0] / 1e9:.2f} G at {result[1][0]}x{result[1][1]})', flush=True)
    texts = {path: path.read_text() for path, _, _ in models}
    for path, name, config in models:
        texts[path] = write_flops(texts[path], name, counted[config][0])
    for path, text in texts.items():
        path.write_text(text)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('configs', nargs='*', help='config files (with --update-metafiles: only these)')
    parser.add_argument('--shape', type=int, nargs='+', help='input H [W] (pixels; latent grid for DiT / SiT)')
    parser.add_argument('--update-metafiles', action='store_true',
                        help="write every non-twin metafile model's FLOPs into configs/*/metafile.yml")
    parser.add_argument('--jobs', type=int, default=1, help='configs counted in parallel (--update-metafiles)')
    args = parser.parse_args(argv)
    if args.update_metafiles:
        update_metafiles(args.jobs, [str(Path(config).resolve().relative_to(ROOT)) for config in args.configs])
        return
    if not args.configs:
        parser.error('give CONFIG [CONFIG ...] or --update-metafiles')
    if args.shape and len(args.shape) > 2:
        parser.error('--shape takes H or H W')
    shape = (args.shape[0], args.shape[-1]) if args.shape else None
    for config in args.configs:
        flops, size = _count(config, shape)
        print(f'{config}: {flops} FLOPs ({flops / 1e9:.2f} G) at {size[0]}x{size[1]}')


if __name__ == '__main__':
    main()
