"""Style v3, a second independent draw with either contrast polarity and any rotation.

Each image draws a polarity (light fills on a darker background or dark fills on a lighter one, 50/50). The
background is a linear gradient between two colours of random hue whose brightness (ITU-R 601 luma, the ``L``
of Pillow) lies within +-:data:`GRADIENT_SPREAD` of an image level drawn for that polarity; the fill is a colour
of random hue whose luma differs from the mean luma of the background under the shape and its outline by
:data:`MIN_CONTRAST` to :data:`MAX_CONTRAST` grey levels, in the image's direction; the 1-2 pixel outline has a
uniformly random colour; Gaussian pixel noise of std :data:`NOISE_STD`. Shapes are rotated uniformly in
[0, 2 pi). Sizes are circumradii (the largest vertex distance from the centre) as fractions of the image side,
drawn uniformly for every class (per :data:`LAYOUTS`: ImageNet and ADE20K 0.26-0.42 at 64 px, ADE20K with 1-4
overlapping shapes; COCO 0.12-0.24 of 128 px with 1-3 shapes kept apart), the statistics of an independently
written generator of the same four classes. At one circumradius a circle covers 2.4x a triangle's area, as in that
generator's draw.
"""
from typing import Dict, List, Optional, Tuple

import numpy as np
from PIL import Image

from .drawing import PaintedShape, finish_image, linear_gradient
from .geometry import SHAPE_CLASSES, ShapeDraw, centred_shape, circumradius, place_shapes, polygon_mask, ring
from .style_v2 import LayoutStyle

#: Per layout: circumradius (fraction of the image side; not ``sqrt(area)`` as in v2) and shapes per image.
LAYOUTS: Dict[str, LayoutStyle] = dict(
    imagenet=LayoutStyle(size=(0.26, 0.42), count=(1, 1)),
    ade20k=LayoutStyle(size=(0.26, 0.42), count=(1, 4)),
    coco=LayoutStyle(size=(0.12, 0.24), count=(1, 3)),
)
#: Whether the shapes of a scene may overlap, per layout.
OVERLAP = dict(ade20k=True, coco=False)
LUMA = np.array([0.299, 0.587, 0.114])  # ITU-R 601, as Pillow's RGB -> L
#: Background level (luma) per polarity: low for light fills, high for dark fills, so that a fill
#: :data:`MAX_CONTRAST` levels away always exists.
BACKGROUND_LEVELS = {'light fill': (25., 135.), 'dark fill': (120., 230.)}
GRADIENT_SPREAD = 20.  # each gradient colour's luma lies within this of the image level
MIN_CONTRAST = 80.  # grey levels between a fill's luma and the mean luma of the background under it
MAX_CONTRAST = 200.
NOISE_STD = 12.
OUTLINE_WIDTH = (1, 2)  # pixels, inclusive
GAP = 6.0  # pixels between the circumscribed discs of two COCO shapes: their outlines (<= 2 px) never touch


def colour_of_luma(rng: np.random.Generator, luma: float) -> np.ndarray:
    """Return an RGB colour (``(3,)`` floats in [0, 255]) of random hue and saturation with exactly ``luma``.

    A grey of that luma is moved along a random direction of zero luma, by a random fraction of the distance to
    the RGB cube's surface.
    """
    direction = rng.uniform(-1., 1., size=3)
    direction -= LUMA @ direction  # LUMA sums to 1: the direction now keeps the luma
    with np.errstate(divide='ignore'):
        reach = np.where(direction > 0, (255. - luma) / direction, np.where(direction < 0, -luma / direction, np.inf))
    return luma + rng.uniform(0., 1.) * reach.min() * direction


def _shape(rng: np.random.Generator, image_size: int, layout: str, label: Optional[int] = None) -> ShapeDraw:
    """Draw ``(label, area, angle)``: the circumradius uniform in the layout's size range, any angle."""
    if label is None:
        label = int(rng.integers(len(SHAPE_CLASSES)))
    radius = rng.uniform(*LAYOUTS[layout].size) * image_size
    area = (radius / circumradius(SHAPE_CLASSES[label], 1.0))**2
    return label, area, rng.uniform(0., 2 * np.pi)


def _paint(rng: np.random.Generator, image: np.ndarray, background: np.ndarray, light_fill: bool, label: int,
           polygon: np.ndarray) -> PaintedShape:
    """Draw the outline and the fill of ``polygon`` into ``image`` (in place); the fill's luma is set against
    ``background`` (the image before any shape) under the shape and its outline."""
    mask = polygon_mask(polygon, *image.shape[:2])
    border = ring(mask, int(rng.integers(OUTLINE_WIDTH[0], OUTLINE_WIDTH[1] + 1)))
    under = float((background[mask | border] @ LUMA).mean())
    lo, hi = (under + MIN_CONTRAST, min(255., under + MAX_CONTRAST)) if light_fill else \
        (max(0., under - MAX_CONTRAST), under - MIN_CONTRAST)
    image[border] = rng.uniform(0, 255, size=3)
    image[mask] = colour_of_luma(rng, rng.uniform(lo, hi))
    return PaintedShape(label, polygon, mask, border)


def render(rng: np.random.Generator, image_size: int, layout: str,
            label: Optional[int] = None) -> Tuple[Image.Image, List[PaintedShape]]:
    """Render an image of ``layout`` and its shapes: ``label`` fixes the class of one centred-ish shape
    (classification); otherwise the layout's number of shapes, overlapping or apart (per :data:`OVERLAP`)."""
    polarity = 'light fill' if rng.random() < 0.5 else 'dark fill'
    level = rng.uniform(*BACKGROUND_LEVELS[polarity])
    ends = np.stack([colour_of_luma(rng, level + rng.uniform(-GRADIENT_SPREAD, GRADIENT_SPREAD)) for _ in range(2)])
    background = linear_gradient(rng, image_size, ends)
    if label is not None:
        _, area, angle = _shape(rng, image_size, layout, label)
        shapes = [(label, centred_shape(rng, image_size, label, area, angle))]
    else:
        lo, hi = LAYOUTS[layout].count
        shapes = place_shapes(rng, image_size, int(rng.integers(lo, hi + 1)), lambda: _shape(rng, image_size, layout),
                              allow_overlap=OVERLAP[layout], gap=GAP)
    image = background.copy()
    painted = [_paint(rng, image, background, polarity == 'light fill', lab, polygon) for lab, polygon in shapes]
    return finish_image(rng, image, NOISE_STD), painted


def render_classification(rng: np.random.Generator, image_size: int, label: int) -> Image.Image:
    """Render one image with a single shape of class ``label`` near the centre."""
    return render(rng, image_size, 'imagenet', label)[0]


def render_scene(rng: np.random.Generator, image_size: int, layout: str) -> Tuple[Image.Image, List[PaintedShape]]:
    """Render the shapes of a segmentation (``'ade20k'``) or detection (``'coco'``) scene; each border is the
    drawn outline."""
    return render(rng, image_size, layout)
