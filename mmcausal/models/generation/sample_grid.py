"""A grid of class-conditional samples, a row per label, each row named on its left: what
``tools/generation/sample.py --grid`` and :class:`~mmcausal.engine.SampleGridHook` write."""
from typing import List, Optional, Sequence

import numpy as np
import torch
from mmpretrain.structures import DataSample
from PIL import Image, ImageDraw, ImageFont
from torchvision.utils import make_grid

#: Pixels between the grid's images (and around them), and the longest row name drawn (characters).
GRID_PADDING, MAX_NAME_LENGTH = 2, 16


def sample_grid(model, labels: Sequence[int], samples_per_label: int) -> torch.Tensor:
    """``(R * C, 3, H, W)`` uint8 samples of ``model`` (a generative model, or its DDP / FSDP wrapper: sampled through
    its forward, so FSDP gathers the shards), ``C = samples_per_label`` of each of the ``R`` labels in turn. Sample
    ``i = r * C + c`` draws its noise from the model's ``test_cfg`` seed + ``i``: the same labels give the same grid."""
    data = [DataSample(metainfo=dict(sample_idx=index)).set_gt_label(int(label))
            for index, label in enumerate(label for label in labels for _ in range(samples_per_label))]
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return torch.stack([sample.pred_img for sample in model(data_samples=data, mode='predict')]).cpu()
    finally:
        model.train(training)


def labelled_grid(images: torch.Tensor, samples_per_label: int, row_names: Sequence[str]) -> np.ndarray:
    """``(H', W', 3)`` uint8: ``images`` (``(R * C, 3, H, W)``, :func:`sample_grid`) as ``R`` rows of ``C`` with
    ``GRID_PADDING`` pixels between and around them, after a white margin holding each row's name (black text)."""
    if len(row_names) * samples_per_label != len(images):
        raise ValueError(f'{len(images)} images are not {len(row_names)} rows of {samples_per_label}.')
    grid = Image.fromarray(make_grid(images, nrow=samples_per_label, padding=GRID_PADDING).permute(1, 2, 0).numpy())
    font = ImageFont.load_default()
    names = [name[:MAX_NAME_LENGTH] for name in row_names]
    margin = max(int(font.getlength(name)) for name in names) + 2 * GRID_PADDING
    canvas = Image.new('RGB', (margin + grid.width, grid.height), 'white')
    canvas.paste(grid, (margin, 0))
    draw, row_height = ImageDraw.Draw(canvas), images.shape[2] + GRID_PADDING
    for row, name in enumerate(names):
        _, top, _, bottom = font.getbbox(name)
        draw.text((GRID_PADDING, row * row_height + (row_height + GRID_PADDING - top - bottom) // 2), name,
                  fill='black', font=font)
    return np.asarray(canvas)


def row_names(labels: Sequence[int], class_names: Optional[Sequence[str]] = None) -> List[str]:
    """``'<label> <class name>'`` for each label (the label alone without ``class_names``)."""
    return [f'{label} {class_names[label]}' if class_names else str(label) for label in labels]


__all__ = ['GRID_PADDING', 'labelled_grid', 'row_names', 'sample_grid']
