"""Style v2, an independent draw for checking that a recipe carries over beyond v1: the opposite contrast (a
linear gradient between two light colours plus Gaussian noise of a random strength, dark fills kept apart from
the background under them), a 1-2 pixel outline of any colour, other sizes (COCO about 30-60 px at 128 px, v1
about 16-40 px; ADE20K 19-32 px at 64 px, v1 14-26 px; the area is still class-independent) and other counts
(COCO 1-3, ADE20K 1-2, ImageNet one) of shapes separated by a gap; rotation within +-20 degrees as in v1.

A v2 with fills and backgrounds from the whole RGB cube (either polarity) *and* +-45 degree rotations stayed at
chance with the iLLaMA-nano classification twin (21-24 %, also at 90 epochs), while either change alone was
learnt (63-81 %). ADE20K shapes of 11-23 px were segmented from the background but not classified (iLLaMA twin:
mIoU 26.8, every shape "circle"); at 19-32 px the iLLaMA and VisionLLaMA twins reach 42.0 and 98.4.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
from PIL import Image

from . import style_v1
from .drawing import PaintedShape, finish_image, linear_gradient, pick_colour
from .geometry import SHAPE_CLASSES, ShapeDraw, centred_shape, place_shapes, polygon_mask, ring


@dataclass(frozen=True)
class LayoutStyle:
    """Per-layout statistics of a style: shape size ``sqrt(area)`` (fraction of the image side, the same for
    every class, so the area tells nothing about the class) and the number of shapes per image (inclusive)."""
    size: Tuple[float, float]
    count: Tuple[int, int]


LAYOUTS: Dict[str, LayoutStyle] = dict(
    # up to 0.55: the largest triangle (circumradius 0.88 sqrt(area)) still fits inside the image
    imagenet=LayoutStyle(size=(0.3, 0.55), count=(1, 1)),
    # 19-32 px at 64 px (2.4-4 patches of 8 px); smaller shapes are segmented but barely classified by the twins
    ade20k=LayoutStyle(size=(0.3, 0.5), count=(1, 2)),
    # 24-46 px at 128 px: extents of about 30-60 px (square side 24-46, circle 27-52, cross 32-62)
    coco=LayoutStyle(size=(24 / 128, 46 / 128), count=(1, 3)),
)
MAX_ROTATION = style_v1.MAX_ROTATION  # radians; see the module docstring for why not more
BACKGROUND_RANGE = (150., 255.)  # per-channel values of the two gradient colours (light)
FILL_RANGE = (0., 100.)  # per-channel values of fills (dark)
NOISE_STD = (3.0, 12.0)  # per-image range of the Gaussian pixel noise
MIN_COLOUR_DISTANCE = 100.0  # fill vs. most of the pixels under it and its outline
OUTLINE_WIDTH = (1, 2)  # pixels, inclusive
GAP = 4.0  # pixels between the circumscribed discs of two shapes


def _shape(rng: np.random.Generator, image_size: int, layout: str, label: Optional[int] = None) -> ShapeDraw:
    """Draw ``(label, area, angle)``: ``sqrt(area)`` uniform in the layout's size range, the angle uniform in
    +-:data:`MAX_ROTATION`."""
    if label is None:
        label = int(rng.integers(len(SHAPE_CLASSES)))
    area = (rng.uniform(*LAYOUTS[layout].size) * image_size)**2
    return label, area, rng.uniform(-MAX_ROTATION, MAX_ROTATION)


def _paint(rng: np.random.Generator, image: np.ndarray, label: int, polygon: np.ndarray) -> PaintedShape:
    """Fill ``polygon`` and draw its outline (in place). The fill colour (dark, :data:`FILL_RANGE`) is kept
    :data:`MIN_COLOUR_DISTANCE` away from the background under the shape and its outline; the outline colour is
    uniform in the whole RGB cube."""
    mask = polygon_mask(polygon, *image.shape[:2])
    border = ring(mask, int(rng.integers(OUTLINE_WIDTH[0], OUTLINE_WIDTH[1] + 1)))
    fill = pick_colour(rng, image[mask | border], FILL_RANGE, MIN_COLOUR_DISTANCE)
    image[border] = rng.uniform(0, 255, size=3)
    image[mask] = fill
    return PaintedShape(label, polygon, mask, border)


def render_background(rng: np.random.Generator, size: int) -> np.ndarray:
    """A ``(size, size, 3)`` float linear gradient between two random colours of :data:`BACKGROUND_RANGE`."""
    return linear_gradient(rng, size, rng.uniform(*BACKGROUND_RANGE, size=(2, 3)))


def _render(rng: np.random.Generator, image_size: int, layout: str,
            label: Optional[int] = None) -> Tuple[Image.Image, List[PaintedShape]]:
    """Render an image of ``layout``: ``label`` fixes the class of a single centred-ish shape (classification);
    otherwise 1-3 shapes (per :data:`LAYOUTS`) are placed at least :data:`GAP` pixels apart."""
    image = render_background(rng, image_size)
    noise_std = rng.uniform(*NOISE_STD)
    if label is not None:
        _, area, angle = _shape(rng, image_size, layout, label)
        shapes = [(label, centred_shape(rng, image_size, label, area, angle))]
    else:
        lo, hi = LAYOUTS[layout].count
        shapes = place_shapes(rng, image_size, int(rng.integers(lo, hi + 1)),
                              lambda: _shape(rng, image_size, layout), allow_overlap=False, gap=GAP)
    painted = [_paint(rng, image, lab, polygon) for lab, polygon in shapes]
    return finish_image(rng, image, noise_std), painted


def render_classification(rng: np.random.Generator, image_size: int, label: int) -> Image.Image:
    """Render one image with a single shape of class ``label`` near the centre."""
    return _render(rng, image_size, 'imagenet', label)[0]


def render_scene(rng: np.random.Generator, image_size: int, layout: str) -> Tuple[Image.Image, List[PaintedShape]]:
    """Render the shapes of a segmentation (``'ade20k'``) or detection (``'coco'``) scene; each border is the
    drawn outline."""
    return _render(rng, image_size, layout)
