"""Files the analysis tools write: PNG figures (matplotlib's object API on the Agg canvas, never pyplot, so no
display or global backend is touched) and CSV tables."""
import csv
import os
import os.path as osp
from typing import Iterable, Optional, Sequence, Tuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image
from torch import Tensor

#: resolution of every PNG and the colours of its palette: small files for the docs, still readable
DPI = 80
PALETTE = 128


def new_figure(rows: int, cols: int, cell: Tuple[float, float] = (2.4, 2.4)) -> Tuple[Figure, np.ndarray]:
    """A figure of ``rows x cols`` axes (a 2-D array, even for one row or column), ``cell`` inches each."""
    figure = Figure(figsize=(cell[0] * cols, cell[1] * rows))
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, cols, squeeze=False)
    return figure, axes


def save_figure(figure: Figure, path: str) -> str:
    """Write ``figure`` as a PNG of :data:`PALETTE` colours (a few times smaller than full colour, for the docs),
    creating the folder; returns ``path``."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    figure.set_dpi(DPI)
    figure.tight_layout()
    figure.canvas.draw()
    pixels = np.asarray(figure.canvas.buffer_rgba())[..., :3]
    Image.fromarray(pixels).quantize(PALETTE, dither=Image.Dither.NONE).save(path, optimize=True)
    return path


def write_csv(path: str, header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """Write a CSV table (creating the folder); floats keep 6 significant digits. Returns ``path``."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, 'w', newline='', encoding='utf-8') as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows([f'{value:.6g}' if isinstance(value, float) else value for value in row] for row in rows)
    return path


def display_image(inputs: Tensor) -> np.ndarray:
    """A ``(C, H, W)`` network input as an ``(H, W, 3)`` picture in ``[0, 1]`` (min-max scaled; grey for C = 1)."""
    image = inputs.detach().float().cpu()
    image = (image - image.min()) / (image.max() - image.min()).clamp(min=1e-12)
    image = image.expand(3, -1, -1) if image.shape[0] == 1 else image[:3]
    return image.permute(1, 2, 0).numpy()


def fraction_colorbar(ax: Axes, cmap: str, label: str = 'fraction of max') -> None:
    """A colour bar beside ``ax`` for values divided by their maximum (0 to 1)."""
    bar = ax.figure.colorbar(ScalarMappable(Normalize(0, 1), cmap), ax=ax, fraction=.046, pad=.03, ticks=[0, .5, 1])
    bar.ax.tick_params(labelsize=6)
    bar.set_label(label, fontsize=6)


def pixel_ticks(ax: Axes, height: int, width: int) -> None:
    """Ticks at the image's corners and middle, in pixels."""
    ax.set_xticks([0, width // 2, width])
    ax.set_yticks([0, height // 2, height])
    ax.tick_params(labelsize=6, length=2)


def overlay(ax: Axes, image: np.ndarray, heat: Optional[Tensor], title: str, cmap: str = 'jet',
            mark: Optional[Tuple[int, int]] = None) -> None:
    """Draw ``image`` (in grey under a heat map) with ``heat`` (any ``(h, w)`` grid, stretched over it, divided by
    its maximum, with a colour bar) on top; ``mark`` outlines cell ``(row, col)`` of the grid. Ticks in pixels."""
    height, width = image.shape[:2]
    pixel_ticks(ax, height, width)
    if heat is None:
        ax.imshow(image, extent=(0, width, height, 0))
    else:
        ax.imshow(image.mean(-1), cmap='gray', vmin=0, vmax=1, extent=(0, width, height, 0))
        values = heat.detach().float().cpu()
        values = values / values.max().clamp(min=1e-12)
        ax.imshow(values.numpy(), cmap=cmap, alpha=.55, vmin=0, vmax=1, extent=(0, width, height, 0),
                  interpolation='nearest')
        if mark is not None:
            cell_h, cell_w = height / values.shape[0], width / values.shape[1]
            ax.add_patch(Rectangle((mark[1] * cell_w, mark[0] * cell_h), cell_w, cell_h, fill=False,
                                   edgecolor='white', linewidth=1.5))
        fraction_colorbar(ax, cmap)
    ax.set_title(title, fontsize=8)

