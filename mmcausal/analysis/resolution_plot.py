"""Top-1 against the input resolution, one line per RoPE scheme (VisionLLaMA Tables 11/12 as a picture), from the
results of :func:`mmcausal.analysis.resolution_eval.evaluate_resolutions`."""
import math
import os.path as osp
from typing import Optional, Sequence, Tuple

from .plotting import new_figure, save_figure, write_csv
from .resolution_eval import Results
from .resolution_pipeline import Size, hw, size_label

FILE_NAME = 'top1_vs_resolution'


def write_resolution_plot(results: Results, sizes: Sequence[Size], out_dir: str, train_size: Optional[Size] = None,
                          title: str = '') -> Tuple[str, str]:
    """Write ``top1_vs_resolution.png`` and ``.csv`` (``rope, size, height, width, top1``) into ``out_dir``.

    The x axis is ``sqrt(H * W)`` (the side of a square size), labelled with the sizes; a dotted line marks the
    training size. Returns the two paths.
    """
    sides = [math.sqrt(hw(size)[0] * hw(size)[1]) for size in sizes]
    figure, axes = new_figure(1, 1, (5.2, 3.6))
    ax = axes[0, 0]
    for label, values in results.items():
        ax.plot(sides, [values[size] for size in sizes], marker='o', label=label)
    if train_size is not None:
        ax.axvline(math.sqrt(hw(train_size)[0] * hw(train_size)[1]), color='grey', linestyle=':', label='training size')
    ax.set_xticks(sides, [size_label(size) for size in sizes], fontsize=7)
    ax.set(xlabel='input size (px)', ylabel='top-1 (%)', title=title or 'top-1 vs resolution')
    ax.grid(alpha=.3)
    ax.legend(fontsize=7)
    png = save_figure(figure, osp.join(out_dir, f'{FILE_NAME}.png'))
    rows = [[label, size_label(size), *hw(size), float(values[size])] for label, values in results.items()
            for size in sizes]
    return png, write_csv(osp.join(out_dir, f'{FILE_NAME}.csv'), ('rope', 'size', 'height', 'width', 'top1'), rows)
