"""Style v1, the embedded data: dark textured backgrounds (colour noise plus stripes or a checkerboard), light
fills, no outline, rotation within +-20 degrees, sizes given by area fractions, 1-4 shapes per scene (COCO:
non-overlapping, ADE20K: possibly overlapping)."""
from typing import List, Optional, Tuple

import numpy as np
from PIL import Image

from .drawing import PaintedShape, finish_image, pick_colour, rotated_coords
from .geometry import SHAPE_CLASSES, ShapeDraw, centred_shape, outline, place_shapes, polygon_mask

MIN_COLOUR_DISTANCE = 90.0  # L2 distance in RGB between a shape and most of the background under it
NOISE_STD = 4.0
MAX_ROTATION = np.pi / 9  # radians
BACKGROUND_RANGE = (0., 110.)  # per-channel values of backgrounds
SHAPE_RANGE = (150., 255.)  # per-channel values of shapes
#: Shape area as a fraction of the image area, per layout (ADE20K at 64 px: shapes must span a few patches).
AREA_RANGES = dict(imagenet=(0.12, 0.3), ade20k=(0.05, 0.16), coco=(0.015, 0.1))
MAX_SHAPES = 4
#: Whether the shapes of a scene may overlap, per layout.
OVERLAP = dict(ade20k=True, coco=False)


def render_background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Return a ``(size, size, 3)`` float image: low-frequency colour noise plus a random pattern.

    The pattern is stripes or a checkerboard with a random colour, period, angle and opacity. Backgrounds
    are dark (channels in ``BACKGROUND_RANGE``) and shapes light (``SHAPE_RANGE``), whatever the class:
    a consistent contrast polarity is what lets a small model learn the shapes in a few hundred steps.
    """
    grid = rng.integers(2, 5)
    coarse = rng.uniform(*BACKGROUND_RANGE, size=(grid, grid, 3)).astype(np.uint8)
    base = np.asarray(Image.fromarray(coarse).resize((size, size), Image.Resampling.BILINEAR), dtype=np.float64)
    u, v = rotated_coords(size, rng.uniform(0, np.pi))
    period = rng.uniform(0.06, 0.25) * size
    if rng.random() < 0.5:
        pattern = (np.floor(u / period) % 2).astype(bool)
    else:
        pattern = ((np.floor(u / period) + np.floor(v / period)) % 2).astype(bool)
    colour = rng.uniform(*BACKGROUND_RANGE, size=3)
    alpha = rng.uniform(0.25, 0.6)
    base[pattern] = (1 - alpha) * base[pattern] + alpha * colour
    return base


def paint_polygon(rng: np.random.Generator, image: np.ndarray, polygon: np.ndarray) -> np.ndarray:
    """Fill ``polygon`` in ``image`` (in place) with a random contrasting colour; return the filled mask.

    The colour is picked against the pixels under the polygon and its 1-pixel outline.
    """
    mask = polygon_mask(polygon, *image.shape[:2])
    image[mask] = pick_colour(rng, image[mask | outline(mask)], SHAPE_RANGE, MIN_COLOUR_DISTANCE)
    return mask


def random_shape(rng: np.random.Generator, image_size: int, layout: str, label: Optional[int] = None) -> ShapeDraw:
    """Draw ``(label, area, angle)``: class (unless given), area in the layout's range and rotation.

    Rotation is drawn from the same +-``MAX_ROTATION`` range for every class, so it carries no class
    information (small enough that a square never turns into a diamond: the classes stay learnable in a
    few hundred CPU iterations).
    """
    if label is None:
        label = int(rng.integers(len(SHAPE_CLASSES)))
    area = rng.uniform(*AREA_RANGES[layout]) * image_size**2
    return label, area, rng.uniform(-MAX_ROTATION, MAX_ROTATION)


def render_classification(rng: np.random.Generator, image_size: int, label: int) -> Image.Image:
    """Render one image with a single shape of class ``label`` near the centre."""
    image = render_background(rng, image_size)
    _, area, angle = random_shape(rng, image_size, 'imagenet', label)
    paint_polygon(rng, image, centred_shape(rng, image_size, label, area, angle))
    return finish_image(rng, image, NOISE_STD)


def render_scene(rng: np.random.Generator, image_size: int, layout: str) -> Tuple[Image.Image, List[PaintedShape]]:
    """Render 1-4 shapes (``'ade20k'``: possibly overlapping, later ones on top; ``'coco'``: apart); the border of
    each shape is its 1-pixel outline."""
    image = render_background(rng, image_size)
    count = int(rng.integers(1, MAX_SHAPES + 1))
    shapes = place_shapes(rng, image_size, count, lambda: random_shape(rng, image_size, layout),
                          allow_overlap=OVERLAP[layout])
    painted = []
    for label, polygon in shapes:
        mask = paint_polygon(rng, image, polygon)
        painted.append(PaintedShape(label, polygon, mask, outline(mask)))
    return finish_image(rng, image, NOISE_STD), painted
