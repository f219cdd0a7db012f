"""FID against training step (VisionLLaMA Table 10: SiT-LLaMA and SiT at 100k-400k iterations): every checkpoint of
a run sampled with the config's ``model.test_cfg`` and evaluated against one reference, then a table (CSV and
markdown, Table 10's layout) and a plot.

Samples go to ``OUT/samples/iter_<step>/`` (PNGs and ``samples.npz``, as ``tools/generation/sample.py`` writes
them), so an interrupted evaluation resumes where it stopped; delete that folder to sample a checkpoint again.
"""
import json
import os.path as osp
import re
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from mmcausal.apis.generation import model_sample_labels, sample_to_folder, write_npz
from mmcausal.evaluation import evaluate_generation, load_sample_npz
from mmcausal.evaluation.fidelity import ADM_IS_SPLITS, KID_SUBSET_SIZE
from .errors import AnalysisError
from .inputs import build_model
from .plotting import new_figure, save_figure, write_csv

FILE_NAME = 'fid_curve'
CHECKPOINT_NAME = re.compile(r'^iter_(\d+)\.pth$')
#: the columns of the CSV and of the per-step markdown table: (metrics key, heading)
COLUMNS = (('fd', 'FID'), ('sfid', 'sFID'), ('inception_score', 'IS'), ('precision', 'precision'),
           ('recall', 'recall'), ('kid', 'KID'))


def run_checkpoints(paths: Sequence[str]) -> List[Tuple[int, Path]]:
    """``(step, checkpoint)`` of every ``iter_<step>.pth`` in the given work dirs and of the given files, sorted by
    step (a file's step is read from its name, else from its ``meta.iter``)."""
    found: Dict[int, Path] = {}
    for path in map(Path, paths):
        files = sorted(path.glob('iter_*.pth')) if path.is_dir() else [path]
        if path.is_dir() and not files:
            raise AnalysisError(f'{path} holds no iter_<step>.pth checkpoint; give the work dir of an iteration-based '
                                'run (or the checkpoint files).')
        for file in files:
            if not file.is_file():
                raise AnalysisError(f'{file} does not exist; give a run\'s work dir or its iter_<step>.pth files.')
            step = _step(file)
            if step in found and found[step] != file:
                raise AnalysisError(f'{found[step]} and {file} are both step {step}; give the checkpoints of one run.')
            found[step] = file
    return sorted(found.items())


def _step(file: Path) -> int:
    match = CHECKPOINT_NAME.match(file.name)
    if match:
        return int(match.group(1))
    meta = torch.load(file, map_location='cpu', weights_only=False).get('meta', {})
    if 'iter' not in meta:
        raise AnalysisError(f'{file} is not named iter_<step>.pth and holds no meta.iter: its training step is '
                            'unknown (rename it iter_<step>.pth).')
    return int(meta['iter'])


def evaluate_checkpoints(cfg, checkpoints: Sequence[Tuple[int, Path]], out_dir: str, num_samples: int,
                         reference: np.ndarray, extractor, reference_stats: Optional[Mapping[str, np.ndarray]] = None,
                         batch_size: int = 32, eval_batch_size: int = 100, splits: int = ADM_IS_SPLITS,
                         kid_subset_size: int = KID_SUBSET_SIZE, device: str = 'cpu',
                         progress: Callable[[str], None] = print) -> List[dict]:
    """Sample ``num_samples`` images from each checkpoint (``cfg`` with its ``model.test_cfg``: sampler, guidance,
    seed, label rule) into ``out_dir/samples/iter_<step>/`` and evaluate them
    (:func:`~mmcausal.evaluation.evaluate_generation`, no memorisation check). Returns one row per checkpoint:
    ``step``, ``checkpoint`` and the metrics."""
    rows = []
    for step, checkpoint in checkpoints:
        folder = osp.join(out_dir, 'samples', f'iter_{step}')
        model = build_model(cfg, str(checkpoint)).to(device)
        labels = model_sample_labels(model, num_samples)  # the test_cfg's label rule, as sample.py
        sample_to_folder(model, folder, labels, batch_size)
        del model
        samples, labels = load_sample_npz(str(write_npz(folder, labels)))
        metrics = evaluate_generation(samples, reference, extractor, labels=labels, k=3, splits=splits,
                                      batch_size=eval_batch_size, memorisation_space='none',
                                      reference_stats=reference_stats, kid_subset_size=kid_subset_size)
        rows.append(dict(step=step, checkpoint=str(checkpoint), **metrics))
        progress(f'step {step}: FID {metrics["fd"]:.4f} ({num_samples} samples of {checkpoint})')
    return rows


def step_label(step: int) -> str:
    """``100000`` -> ``'100k'`` (Table 10's headings); other steps as they are."""
    return f'{step // 1000}k' if step >= 1000 and step % 1000 == 0 else str(step)


def curve_markdown(rows: Sequence[Mapping], label: str) -> str:
    """Table 10's layout (one row of FID per run, a column per step), then every metric per step."""
    steps = [step_label(row['step']) for row in rows]
    fids = ' | '.join(f"{row['fd']:.2f}" for row in rows)
    headings = ' | '.join(heading for _, heading in COLUMNS)
    lines = [f'| run | {" | ".join(steps)} |', '|---|' + '---|' * len(rows), f'| {label} | {fids} |', '',
             f'| step | {headings} |', '|---|' + '---|' * len(COLUMNS)]
    for row in rows:
        values = ' | '.join(f'{row[key]:.4g}' for key, _ in COLUMNS)
        lines.append(f'| {step_label(row["step"])} | {values} |')
    return '\n'.join(lines) + '\n'


def write_curve(rows: Sequence[Mapping], out_dir: str, label: str, title: str = '') -> Dict[str, str]:
    """Write ``fid_curve.csv`` (``step``, the metrics, ``checkpoint``), ``fid_curve.md``, ``fid_curve.json`` (the
    rows) and ``fid_curve.png`` (FID against the training step) into ``out_dir``; returns their paths."""
    if not rows:
        raise AnalysisError('No checkpoint was evaluated: nothing to tabulate.')
    base = osp.join(out_dir, FILE_NAME)
    paths = dict(csv=write_csv(f'{base}.csv', ('step', *(key for key, _ in COLUMNS), 'checkpoint'),
                               [[row['step'], *(float(row[key]) for key, _ in COLUMNS), row['checkpoint']]
                                for row in rows]))
    Path(f'{base}.md').write_text(curve_markdown(rows, label), encoding='utf-8')
    Path(f'{base}.json').write_text(json.dumps(list(rows), indent=2), encoding='utf-8')
    figure, axes = new_figure(1, 1, (5.2, 3.6))
    ax = axes[0, 0]
    ax.plot([row['step'] for row in rows], [row['fd'] for row in rows], marker='o', label=label)
    ax.set_xticks([row['step'] for row in rows], [step_label(row['step']) for row in rows], fontsize=7)
    ax.set(xlabel='training step', ylabel='FID', title=title or f'FID vs training step ({label})')
    ax.grid(alpha=.3)
    ax.legend(fontsize=7)
    paths.update(md=f'{base}.md', json=f'{base}.json', png=save_figure(figure, f'{base}.png'))
    return paths
