"""Cue-conflict images of the shapes classes (the stimuli of Geirhos et al. 2019), in the published folder layout.

Geirhos et al. give an image the shape of one class and the texture of another (by style transfer) and ask which of
the two a classifier names. In the shapes data nothing but the form tells the classes apart (colours, sizes and
backgrounds are drawn independently of the class), so here the texture of a class is its form repeated at a small
scale: a cue-conflict image is the silhouette of the *shape* class, filled as a shape of the style is filled, with a
lattice of small shapes of the *texture* class cut into the fill (the shape cue: the global outline; the texture
cue: the local form, as in Navon's large letters made of small ones).

Drawing, per image (its own random stream, as the other shapes sets):

* the background, the fill colour (kept apart from the background under the silhouette), the outline ring (styles
  v2 and v3) and the pixel noise of ``style`` (:mod:`.styles`), so that a classifier trained on that style sees its
  own colours;
* the silhouette: ``sqrt(area)`` uniform in :data:`SILHOUETTE_SIZE` of the image side, near the centre, rotated as
  the style rotates its shapes (v1, v2: +-20 degrees; v3: any angle);
* the texture: a square lattice, rotated by an angle of the same range and shifted by a random phase, of elements
  with ``sqrt(area)`` = :data:`ELEMENT_SCALE` times the silhouette's, :data:`LATTICE_PITCH` times that apart (every
  class's extent along the lattice axes is at most 1.52 times it, so elements never touch); each element is painted
  where it overlaps the silhouette (clipped at its outline) in a colour of the style's background range kept apart
  from the fill (v3: a colour of the background's luma level).

Layout (that of the published ``cue-conflict`` set, read by ``mmcausal.analysis.shape_bias``)::

    root/<shape>/<shape><n>-<texture><m>.png

for every ordered pair of classes and ``i = 1 .. num_per_pair`` (``n = m = i``). Pairs of one class (a silhouette
filled with its own form) are written too, as the published set holds 80 such images among 1280: they carry no
conflict and the analysis leaves them out. A ``shapes_meta.json`` next to the class folders makes a second call
with the same parameters reuse the files (:mod:`.cache`).
"""
import os
import os.path as osp
from typing import Callable, Dict, NamedTuple, Tuple

import numpy as np
from PIL import Image

from . import style_v1, style_v2, style_v3
from .cache import generate_cached
from .drawing import finish_image, linear_gradient, pick_colour, rotated_coords
from .geometry import SHAPE_CLASSES, centred_shape, make_polygon, polygon_mask, ring
from .styles import STYLES, get_style

#: ``sqrt(area)`` of the silhouette as a fraction of the image side (the largest triangle still fits)
SILHOUETTE_SIZE = (0.45, 0.55)
#: ``sqrt(area)`` of a texture element as a fraction of the silhouette's
ELEMENT_SCALE = 0.22
#: distance of neighbouring elements in units of the element's ``sqrt(area)``
LATTICE_PITCH = 1.75
#: the entropy tag of this set's random streams (after those of the ImageNet, ADE20K and COCO layouts, 0..2)
DATASET_ID = 3
PNG_COMPRESS_LEVEL = 6


class Palette(NamedTuple):
    """How one image of a style is coloured: its background ``(H, W, 3)``, ``fill(rng, under)`` (the silhouette's
    colour, set against the ``(N, 3)`` pixels under it), ``texture(rng, fill)`` (the elements' colour, a background
    colour set against the fill), the noise std, the outline width (0: none) and the largest rotation."""
    background: np.ndarray
    fill: Callable[[np.random.Generator, np.ndarray], np.ndarray]
    texture: Callable[[np.random.Generator, np.ndarray], np.ndarray]
    noise_std: float
    outline_width: int
    max_rotation: float


def _picker(colour_range: Tuple[float, float], min_distance: float) -> Callable:
    """``(rng, under) -> colour``: a colour of ``colour_range`` kept ``min_distance`` from most of ``under``."""
    return lambda rng, under: pick_colour(rng, np.reshape(under, (-1, 3)), colour_range, min_distance)


def _palette_v1(rng: np.random.Generator, size: int) -> Palette:
    """Dark textured background, light fills, no outline."""
    return Palette(style_v1.render_background(rng, size),
                   _picker(style_v1.SHAPE_RANGE, style_v1.MIN_COLOUR_DISTANCE),
                   _picker(style_v1.BACKGROUND_RANGE, style_v1.MIN_COLOUR_DISTANCE), style_v1.NOISE_STD, 0,
                   style_v1.MAX_ROTATION)


def _palette_v2(rng: np.random.Generator, size: int) -> Palette:
    """Light gradient background, dark fills, an outline of 1-2 pixels, noise of a random strength."""
    background = linear_gradient(rng, size, rng.uniform(*style_v2.BACKGROUND_RANGE, size=(2, 3)))
    return Palette(background, _picker(style_v2.FILL_RANGE, style_v2.MIN_COLOUR_DISTANCE),
                   _picker(style_v2.BACKGROUND_RANGE, style_v2.MIN_COLOUR_DISTANCE), rng.uniform(*style_v2.NOISE_STD),
                   int(rng.integers(style_v2.OUTLINE_WIDTH[0], style_v2.OUTLINE_WIDTH[1] + 1)),
                   style_v2.MAX_ROTATION)


def _palette_v3(rng: np.random.Generator, size: int) -> Palette:
    """Either polarity: a gradient of two colours near one luma level; the fill's luma 80 to 200 grey levels
    lighter (or darker) than the background under it; elements of the background's level; any rotation."""
    light = rng.random() < 0.5
    level = rng.uniform(*style_v3.BACKGROUND_LEVELS['light fill' if light else 'dark fill'])
    spread = style_v3.GRADIENT_SPREAD
    ends = np.stack([style_v3.colour_of_luma(rng, level + rng.uniform(-spread, spread)) for _ in range(2)])
    sign = 1. if light else -1.

    def fill(rng: np.random.Generator, under: np.ndarray) -> np.ndarray:
        luma = float((np.reshape(under, (-1, 3)) @ style_v3.LUMA).mean())
        contrast = rng.uniform(style_v3.MIN_CONTRAST, style_v3.MAX_CONTRAST)
        return style_v3.colour_of_luma(rng, float(np.clip(luma + sign * contrast, 0., 255.)))

    def texture(rng: np.random.Generator, colour: np.ndarray) -> np.ndarray:
        return style_v3.colour_of_luma(rng, level + rng.uniform(-spread, spread))

    return Palette(linear_gradient(rng, size, ends), fill, texture, style_v3.NOISE_STD,
                   int(rng.integers(style_v3.OUTLINE_WIDTH[0], style_v3.OUTLINE_WIDTH[1] + 1)), np.pi)


_PALETTES: Dict[str, Callable[[np.random.Generator, int], Palette]] = dict(v1=_palette_v1, v2=_palette_v2,
                                                                           v3=_palette_v3)


def stimulus_name(shape: int, texture: int, index: int) -> str:
    """``<shape><n>-<texture><m>.png`` of draw ``index`` (0-based; ``n = m = index + 1``) of a class pair."""
    return f'{SHAPE_CLASSES[shape]}{index + 1}-{SHAPE_CLASSES[texture]}{index + 1}.png'


def stimulus_rng(seed: int, style: str, shape: int, texture: int, index: int) -> np.random.Generator:
    """The random stream of one image, independent of how many others are drawn."""
    return np.random.default_rng([seed, DATASET_ID, STYLES.index(style), shape, texture, index])


def lattice_mask(rng: np.random.Generator, region: np.ndarray, texture: int, element_size: float,
                 max_rotation: float) -> np.ndarray:
    """Bool mask, the shape of ``region`` (``(size, size)``), of a square lattice of ``texture`` shapes of
    ``sqrt(area) = element_size``, rotated by an angle within +-``max_rotation`` and shifted by a random phase,
    clipped to ``region``."""
    size = region.shape[0]
    angle = rng.uniform(-max_rotation, max_rotation)
    pitch = LATTICE_PITCH * element_size
    phase = rng.uniform(0, pitch, size=2)
    u, v = rotated_coords(size, angle)  # lattice-frame coordinates of the pixel centres
    u, v = u[region], v[region]
    mask = np.zeros_like(region)
    cos, sin = np.cos(angle), np.sin(angle)
    for row in np.arange(np.floor((v.min() - phase[1]) / pitch) - 1, np.ceil((v.max() - phase[1]) / pitch) + 2):
        for col in np.arange(np.floor((u.min() - phase[0]) / pitch) - 1, np.ceil((u.max() - phase[0]) / pitch) + 2):
            a, b = phase[0] + col * pitch, phase[1] + row * pitch  # the element's centre in the lattice frame
            centre = (a * cos - b * sin, a * sin + b * cos)  # ... and in the image
            mask |= polygon_mask(make_polygon(SHAPE_CLASSES[texture], centre, element_size**2, angle), size, size)
    return mask & region


def render_cue_conflict(rng: np.random.Generator, image_size: int, shape: int, texture: int,
                        style: str = 'v1') -> Image.Image:
    """One image: the silhouette of class ``shape`` filled in ``style`` with a lattice of class ``texture``."""
    palette = _PALETTES[style](rng, image_size)
    image = palette.background.copy()
    side = rng.uniform(*SILHOUETTE_SIZE) * image_size
    silhouette = polygon_mask(centred_shape(rng, image_size, shape, side**2,
                                            rng.uniform(-palette.max_rotation, palette.max_rotation)),
                              image_size, image_size)
    border = ring(silhouette, palette.outline_width) if palette.outline_width else np.zeros_like(silhouette)
    fill = palette.fill(rng, image[silhouette | border])
    if palette.outline_width:
        image[border] = rng.uniform(0, 255, size=3)
    image[silhouette] = fill
    elements = lattice_mask(rng, silhouette, texture, ELEMENT_SCALE * side, palette.max_rotation)
    image[elements] = palette.texture(rng, fill)
    return finish_image(rng, image, palette.noise_std)


def make_cue_conflict_like(root: str,
                           *,
                           num_per_pair: int = 10,
                           image_size: int = 64,
                           seed: int = 0,
                           style: str = 'v1') -> dict:
    """Write (or reuse) the shapes cue-conflict set: ``root/<shape>/<shape><n>-<texture><m>.png`` for every ordered
    pair of :data:`SHAPE_CLASSES` (16 pairs, 4 of them of one class) and ``num_per_pair`` draws each.

    Args:
        root: Output folder (the ``cue-conflict`` folder of the published layout).
        num_per_pair: Images per ordered class pair.
        image_size: Side of the square images in pixels.
        seed: Random seed; the same seed gives byte-identical files.
        style: ``'v1'`` (default), ``'v2'`` or ``'v3'``: the colours of the shapes set the classifier knows.

    Returns:
        dict: ``root``, ``classes``, ``image_size``, ``num_images`` and ``num_conflicting`` (shape != texture).
    """
    get_style(style)
    if num_per_pair < 1:
        raise ValueError(f'num_per_pair must be at least 1, got {num_per_pair}.')
    params = dict(dataset='cue-conflict', num_per_pair=num_per_pair, image_size=image_size, seed=seed, style=style)
    classes = range(len(SHAPE_CLASSES))

    def generate() -> dict:
        for shape in classes:
            folder = osp.join(root, SHAPE_CLASSES[shape])
            os.makedirs(folder, exist_ok=True)
            for texture in classes:
                for index in range(num_per_pair):
                    image = render_cue_conflict(stimulus_rng(seed, style, shape, texture, index), image_size, shape,
                                                texture, style)
                    image.save(osp.join(folder, stimulus_name(shape, texture, index)), format='PNG',
                               compress_level=PNG_COMPRESS_LEVEL)
        total = len(SHAPE_CLASSES)**2 * num_per_pair
        return dict(classes=list(SHAPE_CLASSES), image_size=image_size, num_images=total,
                    num_conflicting=total - len(SHAPE_CLASSES) * num_per_pair)

    return generate_cached(root, params, SHAPE_CLASSES, generate)
