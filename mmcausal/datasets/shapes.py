"""Tiny synthetic "shapes" datasets in the on-disk layouts of ImageNet, ADE20K and COCO.

The datasets let configs, tests and smoke trainings run through the stock dataset classes of
mmpretrain (``ImageNet``/``CustomDataset``), mmsegmentation (``ADE20KDataset``/``BaseSegDataset``)
and mmdetection (``CocoDataset``) without downloading anything.

Every image is a textured random background (low-frequency colour noise overlaid with stripes or a
checkerboard of a random colour, period and angle) with one or more filled shapes of the classes in
:data:`SHAPE_CLASSES`. Shape colours, sizes, positions and rotations are random and independent of the
class; the shapes of all classes are drawn with the same area distribution, so only the *form* tells
the class apart. Shapes are polygons (circles are 32-gons) rasterised by sampling pixel centres, i.e. a
pixel ``(row, col)`` belongs to a shape iff the point ``(col + 0.5, row + 0.5)`` lies inside the polygon
(the COCO convention); the same polygons give the images, the segmentation maps and the COCO
annotations.

Layouts and label conventions:

* :func:`make_imagenet_like` -- one centred-ish shape per image, label = index in :data:`SHAPE_CLASSES`.
* :func:`make_ade20k_like` -- 1-4 possibly overlapping shapes; ``L`` PNG maps with 0 = unlabelled (a
  1-pixel outline around every shape), 1 = background, ``2 + i`` = ``SHAPE_CLASSES[i]``. With
  ``reduce_zero_label=True`` the classes are :data:`ADE20K_CLASSES` and 0 becomes 255 (ignore).
* :func:`make_coco_like` -- 1-4 non-overlapping shapes with polygon annotations, ``category_id = 1 + i``
  for ``SHAPE_CLASSES[i]``.

Two independent styles (``style=``) draw the same classes into the same file layouts:

* ``'v1'`` (default): dark textured backgrounds (colour noise plus stripes or a checkerboard), light
  fills, no outline, rotation within +-20 degrees, shape sizes given by area fractions, 1-4 shapes per
  scene (COCO: non-overlapping, ADE20K: possibly overlapping).
* ``'v2'``: the opposite contrast: a linear gradient between two light colours plus Gaussian noise of a
  random strength, dark fills kept apart from the background under them, a 1-2 pixel outline of any
  colour, other sizes (COCO about 30-60 px at 128 px, v1 about 16-40 px; ADE20K 19-32 px at 64 px, v1
  14-26 px; the area is still class-independent) and other counts (COCO 1-3, ADE20K 1-2, ImageNet one)
  of shapes separated by a gap; rotation within +-20 degrees as in v1. It uses its own random streams, so
  it is an independent draw, for checking that a recipe carries over beyond v1.

Both styles keep one contrast polarity per style. Measured with the iLLaMA-nano classification twin (30
epochs, 400 images): v1 96 % top-1, v2 81 %; a v2 with fills and backgrounds from the whole RGB cube
(either polarity) *and* +-45 degree rotations stays at chance (21-24 %, also at 90 epochs, where the
training loss falls to 0.68 by memorising), while either change alone is learnt (63-81 %). ADE20K shapes
of 11-23 px were segmented from the background but not classified (iLLaMA twin: mIoU 26.8, every shape
"circle"); at 19-32 px the iLLaMA and VisionLLaMA twins reach 42.0 and 98.4.

Generation is deterministic: each image draws from its own ``numpy.random.default_rng`` seeded with
``(seed, dataset, split, index)``, so the same seed gives byte-identical files (for a given numpy,
Pillow and libjpeg). A ``shapes_meta.json`` holding the parameters is written last; calling a
``make_*`` function again with the same parameters returns the stored summary without touching the
files. Only numpy, Pillow and the standard library are used (no torch), so the generator can run
before the full environment exists.
"""
import json
import os
import os.path as osp
import shutil
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image

#: Shape classes, in label order. Sorted alphabetically on purpose: mmpretrain's folder scanning
#: assigns labels in sorted folder-name order, so the folder and ann-file layouts agree.
SHAPE_CLASSES: Tuple[str, ...] = ('circle', 'cross', 'square', 'triangle')
#: Semantic classes of the ADE20K-like dataset after ``reduce_zero_label`` (label 1 -> 0, ...).
ADE20K_CLASSES: Tuple[str, ...] = ('background', ) + SHAPE_CLASSES

META_FILE = 'shapes_meta.json'
#: Bump when the generated content changes, so that stale datasets are regenerated.
GENERATOR_VERSION = 6

JPEG_QUALITY = 95
CIRCLE_VERTICES = 32
MIN_COLOUR_DISTANCE = 90.0  # L2 distance in RGB between a shape and most of the background under it
NOISE_STD = 4.0
MAX_ROTATION = np.pi / 9  # radians
BACKGROUND_RANGE = (0., 110.)  # per-channel values of backgrounds
SHAPE_RANGE = (150., 255.)  # per-channel values of shapes

STYLES = ('v1', 'v2')

_SPLITS = ('train', 'val')
_DATASET_IDS = {'imagenet': 0, 'ade20k': 1, 'coco': 2}
_IMAGENET_LAYOUTS = ('folder', 'annfile', 'both')

Polygon = np.ndarray  # (K, 2) float array of (x, y) vertices in pixel coordinates


# ----------------------------------------------------------------------------------------------------
# Geometry
# ----------------------------------------------------------------------------------------------------
def _unit_polygon(shape: str) -> Polygon:
    """Return the vertices of ``shape`` centred at the origin with unit area."""
    if shape == 'circle':
        angles = np.arange(CIRCLE_VERTICES) * (2 * np.pi / CIRCLE_VERTICES)
        verts = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    elif shape == 'square':
        verts = np.array([[-1., -1.], [1., -1.], [1., 1.], [-1., 1.]])
    elif shape == 'triangle':
        angles = np.pi / 2 + np.arange(3) * (2 * np.pi / 3)
        verts = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    elif shape == 'cross':
        h, t = 1.5, 0.5  # half arm length and half arm width: arms are 3x as long as wide
        verts = np.array([[-t, -h], [t, -h], [t, -t], [h, -t], [h, t], [t, t], [t, h], [-t, h],
                          [-t, t], [-h, t], [-h, -t], [-t, -t]])
    else:
        raise ValueError(f'Unknown shape {shape!r}; expected one of {SHAPE_CLASSES}.')
    return verts / np.sqrt(polygon_area(verts))


def polygon_area(polygon: Polygon) -> float:
    """Return the area of a simple polygon (shoelace formula)."""
    x, y = polygon[:, 0], polygon[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def make_polygon(shape: str, center: Tuple[float, float], area: float, angle: float) -> Polygon:
    """Return ``shape`` with the given area, rotated by ``angle`` (radians) about ``center``.

    Vertices are rounded to 2 decimals, the precision stored in the COCO annotations, so rendering and
    annotations use exactly the same numbers.
    """
    cos, sin = np.cos(angle), np.sin(angle)
    rotation = np.array([[cos, -sin], [sin, cos]])
    verts = _unit_polygon(shape) * np.sqrt(area) @ rotation.T + np.asarray(center)
    return np.round(verts, 2)


def _circumradius(shape: str, area: float) -> float:
    """Return the largest vertex distance from the centre of ``shape`` with the given area."""
    return float(np.linalg.norm(_unit_polygon(shape), axis=1).max() * np.sqrt(area))


def polygon_mask(polygon: Polygon, height: int, width: int) -> np.ndarray:
    """Rasterise a polygon into a ``(height, width)`` bool mask by testing pixel centres (even-odd)."""
    mask = np.zeros((height, width), dtype=bool)
    x0, y0 = np.floor(polygon.min(axis=0)).astype(int).clip(0)
    x1, y1 = np.ceil(polygon.max(axis=0)).astype(int) + 1
    px, py = np.meshgrid(np.arange(x0, min(x1, width)) + 0.5, np.arange(y0, min(y1, height)) + 0.5)
    inside = np.zeros(px.shape, dtype=bool)
    for (ax, ay), (bx, by) in zip(polygon, np.roll(polygon, -1, axis=0)):
        if ay == by:
            continue
        crosses = (ay > py) != (by > py)
        x_cross = ax + (py - ay) * (bx - ax) / (by - ay)
        inside ^= crosses & (px < x_cross)
    mask[y0:y0 + inside.shape[0], x0:x0 + inside.shape[1]] = inside
    return mask


def _outline(mask: np.ndarray) -> np.ndarray:
    """Return the pixels 8-adjacent to ``mask`` but outside it (a 1-pixel outer boundary)."""
    padded = np.pad(mask, 1)
    h, w = mask.shape
    dilated = np.zeros_like(mask)
    for dy in range(3):
        for dx in range(3):
            dilated |= padded[dy:dy + h, dx:dx + w]
    return dilated & ~mask


# ----------------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------------
def _rotated_coords(size: int, angle: float) -> Tuple[np.ndarray, np.ndarray]:
    """Return pixel-centre coordinates of a ``size``x``size`` grid rotated by ``angle``."""
    y, x = np.mgrid[0:size, 0:size] + 0.5
    return x * np.cos(angle) + y * np.sin(angle), -x * np.sin(angle) + y * np.cos(angle)


def render_background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Return a ``(size, size, 3)`` float image: low-frequency colour noise plus a random pattern.

    The pattern is stripes or a checkerboard with a random colour, period, angle and opacity. Backgrounds
    are dark (channels in ``BACKGROUND_RANGE``) and shapes light (``SHAPE_RANGE``), whatever the class:
    a consistent contrast polarity is what lets a small model learn the shapes in a few hundred steps.
    """
    grid = rng.integers(2, 5)
    coarse = rng.uniform(*BACKGROUND_RANGE, size=(grid, grid, 3)).astype(np.uint8)
    base = np.asarray(Image.fromarray(coarse).resize((size, size), Image.Resampling.BILINEAR), dtype=np.float64)
    u, v = _rotated_coords(size, rng.uniform(0, np.pi))
    period = rng.uniform(0.06, 0.25) * size
    if rng.random() < 0.5:
        pattern = (np.floor(u / period) % 2).astype(bool)
    else:
        pattern = ((np.floor(u / period) + np.floor(v / period)) % 2).astype(bool)
    colour = rng.uniform(*BACKGROUND_RANGE, size=3)
    alpha = rng.uniform(0.25, 0.6)
    base[pattern] = (1 - alpha) * base[pattern] + alpha * colour
    return base


def _pick_colour(rng: np.random.Generator, under: np.ndarray, tries: int = 32,
                 colour_range: Tuple[float, float] = SHAPE_RANGE,
                 min_distance: float = MIN_COLOUR_DISTANCE) -> np.ndarray:
    """Draw a uniformly random RGB colour in ``colour_range`` that stands out from ``under`` (``(N, 3)``).

    A colour is accepted when at least 90% of ``under`` is farther than ``min_distance``; otherwise the
    best of ``tries`` draws is used. The colour never depends on the shape class.
    """
    best, best_score = None, -1.0
    for _ in range(tries):
        colour = rng.uniform(*colour_range, size=3)
        score = float(np.percentile(np.linalg.norm(under - colour, axis=1), 10))
        if score >= min_distance:
            return colour
        if score > best_score:
            best, best_score = colour, score
    return best


def paint_polygon(rng: np.random.Generator, image: np.ndarray, polygon: Polygon) -> np.ndarray:
    """Fill ``polygon`` in ``image`` (in place) with a random contrasting colour; return the filled mask.

    The colour is picked against the pixels under the polygon and its 1-pixel outline.
    """
    mask = polygon_mask(polygon, *image.shape[:2])
    surround = mask | _outline(mask)
    image[mask] = _pick_colour(rng, image[surround])
    return mask


def finish_image(rng: np.random.Generator, image: np.ndarray, noise_std: float = NOISE_STD) -> Image.Image:
    """Add Gaussian pixel noise (std ``noise_std``) and convert a float image to an 8-bit RGB PIL image."""
    noisy = image + rng.normal(0, noise_std, size=image.shape)
    return Image.fromarray(np.clip(np.round(noisy), 0, 255).astype(np.uint8))


def _random_shape(rng: np.random.Generator, image_size: int, area_range: Tuple[float, float],
                  label: Optional[int] = None) -> Tuple[int, float, float]:
    """Draw ``(label, area, angle)``: class (unless given), area in ``area_range`` and rotation.

    Rotation is drawn from the same +-``MAX_ROTATION`` range for every class, so it carries no class
    information (small enough that a square never turns into a diamond: the classes stay learnable in a
    few hundred CPU iterations).
    """
    if label is None:
        label = int(rng.integers(len(SHAPE_CLASSES)))
    lo, hi = area_range
    area = rng.uniform(lo, hi) * image_size**2
    return label, area, rng.uniform(-MAX_ROTATION, MAX_ROTATION)


def _random_center(rng: np.random.Generator, image_size: int, radius: float,
                   spread: float = 1.0) -> np.ndarray:
    """Draw a centre keeping a disc of ``radius`` inside the image; ``spread`` < 1 pulls it inwards."""
    half = (image_size / 2 - radius) * spread
    return image_size / 2 + rng.uniform(-half, half, size=2)


def _place_shapes(rng: np.random.Generator, image_size: int, count: int, area_range: Tuple[float, float],
                  allow_overlap: bool, tries: int = 50, gap: float = 0.0,
                  draw: Optional[Callable[[], Tuple[int, float, float]]] = None) -> List[Tuple[int, Polygon]]:
    """Draw up to ``count`` random shapes inside the image as ``(label, polygon)`` pairs.

    Without ``allow_overlap``, a shape whose circumscribed disc comes closer than ``gap`` pixels to an
    earlier one is moved to a new random position up to ``tries`` times and dropped if it still does not
    fit (the first shape always fits). Class, area and rotation are drawn once per shape (by ``draw``,
    default :func:`_random_shape` with ``area_range``), so the class frequencies stay uniform however
    crowded the image is.
    """
    placed: List[Tuple[int, Polygon]] = []
    discs: List[Tuple[np.ndarray, float]] = []
    for _ in range(count):
        label, area, angle = draw() if draw is not None else _random_shape(rng, image_size, area_range)
        radius = _circumradius(SHAPE_CLASSES[label], area)
        for _ in range(tries):
            center = _random_center(rng, image_size, radius)
            if allow_overlap or all(np.linalg.norm(center - c) > radius + r + gap for c, r in discs):
                placed.append((label, make_polygon(SHAPE_CLASSES[label], center, area, angle)))
                discs.append((center, radius))
                break
    return placed


# ----------------------------------------------------------------------------------------------------
# Style v2: an independent draw (gradient backgrounds, any colours, outlines, separated shapes)
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LayoutStyle:
    """Per-layout statistics of style v2: shape size ``sqrt(area)`` (fraction of the image side, the
    same for every class, so the area tells nothing about the class) and the number of shapes per image
    (inclusive range)."""
    size: Tuple[float, float]
    count: Tuple[int, int]


V2_LAYOUTS: Dict[str, LayoutStyle] = dict(
    # up to 0.55: the largest triangle (circumradius 0.88 sqrt(area)) still fits inside the image
    imagenet=LayoutStyle(size=(0.3, 0.55), count=(1, 1)),
    # 19-32 px at 64 px (2.4-4 patches of 8 px); smaller shapes are segmented but barely classified by the twins
    ade20k=LayoutStyle(size=(0.3, 0.5), count=(1, 2)),
    # 24-46 px at 128 px: extents of about 30-60 px (square side 24-46, circle 27-52, cross 32-62)
    coco=LayoutStyle(size=(24 / 128, 46 / 128), count=(1, 3)),
)
V2_MAX_ROTATION = MAX_ROTATION  # radians; see the module docstring for why not more
V2_BACKGROUND_RANGE = (150., 255.)  # per-channel values of the two gradient colours (light)
V2_FILL_RANGE = (0., 100.)  # per-channel values of fills (dark)
V2_NOISE_STD = (3.0, 12.0)  # per-image range of the Gaussian pixel noise
V2_MIN_COLOUR_DISTANCE = 100.0  # fill vs. most of the pixels under it and its outline
V2_OUTLINE_WIDTH = (1, 2)  # pixels, inclusive
V2_GAP = 4.0  # pixels between the circumscribed discs of two shapes


def render_gradient_background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Return a ``(size, size, 3)`` float image: a linear gradient between two random light colours.

    The direction is uniform in [0, 2 pi); the colours are uniform in :data:`V2_BACKGROUND_RANGE`.
    """
    colours = rng.uniform(*V2_BACKGROUND_RANGE, size=(2, 3))
    u, _ = _rotated_coords(size, rng.uniform(0, 2 * np.pi))
    t = ((u - u.min()) / (u.max() - u.min()))[..., None]
    return (1 - t) * colours[0] + t * colours[1]


def _v2_shape(rng: np.random.Generator, image_size: int, layout: str,
              label: Optional[int] = None) -> Tuple[int, float, float]:
    """Draw ``(label, area, angle)`` for style v2: ``sqrt(area)`` uniform in the layout's size range,
    the angle uniform in +-:data:`V2_MAX_ROTATION`."""
    if label is None:
        label = int(rng.integers(len(SHAPE_CLASSES)))
    area = (rng.uniform(*V2_LAYOUTS[layout].size) * image_size)**2
    return label, area, rng.uniform(-V2_MAX_ROTATION, V2_MAX_ROTATION)


def _ring(mask: np.ndarray, width: int) -> np.ndarray:
    """Return the pixels within ``width`` 8-neighbour steps outside ``mask``."""
    grown = mask
    for _ in range(width):
        grown = grown | _outline(grown)
    return grown & ~mask


def paint_polygon_v2(rng: np.random.Generator, image: np.ndarray, polygon: Polygon) -> Tuple[np.ndarray, np.ndarray]:
    """Fill ``polygon`` and draw its outline (style v2, in place); return ``(fill mask, outline mask)``.

    The fill colour (dark, :data:`V2_FILL_RANGE`) is kept :data:`V2_MIN_COLOUR_DISTANCE` away from the
    background under the shape and its outline; the outline colour is uniform in the whole RGB cube.
    """
    mask = polygon_mask(polygon, *image.shape[:2])
    ring = _ring(mask, int(rng.integers(V2_OUTLINE_WIDTH[0], V2_OUTLINE_WIDTH[1] + 1)))
    fill = _pick_colour(rng, image[mask | ring], colour_range=V2_FILL_RANGE, min_distance=V2_MIN_COLOUR_DISTANCE)
    image[ring] = rng.uniform(0, 255, size=3)
    image[mask] = fill
    return mask, ring


def render_scene_v2(
        rng: np.random.Generator, image_size: int, layout: str,
        label: Optional[int] = None) -> Tuple[Image.Image, List[Tuple[int, np.ndarray, np.ndarray, Polygon]]]:
    """Render a style-v2 image of ``layout``; return it and ``(label, fill, outline, polygon)`` per shape.

    ``label`` fixes the class of a single centred-ish shape (classification); otherwise 1-3 shapes (per
    :data:`V2_LAYOUTS`) are placed at least :data:`V2_GAP` pixels apart.
    """
    image = render_gradient_background(rng, image_size)
    noise_std = rng.uniform(*V2_NOISE_STD)
    if label is not None:
        _, area, angle = _v2_shape(rng, image_size, layout, label)
        radius = _circumradius(SHAPE_CLASSES[label], area)
        center = _random_center(rng, image_size, radius, spread=0.5)
        shapes = [(label, make_polygon(SHAPE_CLASSES[label], center, area, angle))]
    else:
        lo, hi = V2_LAYOUTS[layout].count
        shapes = _place_shapes(rng, image_size, int(rng.integers(lo, hi + 1)), (0., 0.), allow_overlap=False,
                               gap=V2_GAP, draw=lambda: _v2_shape(rng, image_size, layout))
    painted = [(lab, *paint_polygon_v2(rng, image, polygon), polygon) for lab, polygon in shapes]
    return finish_image(rng, image, noise_std), painted


# ----------------------------------------------------------------------------------------------------
# Files and caching
# ----------------------------------------------------------------------------------------------------
def _image_rng(seed: int, dataset: str, split: str, index: int, style: str = 'v1') -> np.random.Generator:
    """Return the generator of one image, independent of how many other images are generated.

    Styles other than v1 append their index to the seed, so each style is an independent draw.
    """
    entropy = [seed, _DATASET_IDS[dataset], _SPLITS.index(split), index]
    return np.random.default_rng(entropy + ([STYLES.index(style)] if style != 'v1' else []))


def _check_style(style: str) -> None:
    """Raise ``ValueError`` for an unknown ``style``."""
    if style not in STYLES:
        raise ValueError(f'style must be one of {STYLES}, got {style!r}.')


def _style_params(params: dict, style: str) -> dict:
    """Return ``params`` plus ``style`` unless it is the default (so v1 metadata stays as it was)."""
    return params if style == 'v1' else dict(params, style=style)


def _save_jpeg(image: Image.Image, path: str) -> None:
    """Save ``image`` as a JPEG with fixed encoder settings, creating parent folders."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    image.save(path, format='JPEG', quality=JPEG_QUALITY, subsampling=0, optimize=False)


def _save_label_png(label: np.ndarray, path: str) -> None:
    """Save a uint8 label map as a single-channel ``L`` PNG with fixed encoder settings."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    Image.fromarray(label.astype(np.uint8)).save(path, format='PNG', compress_level=6)


def _write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8, ``\\n`` newlines), creating parent folders."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8', newline='\n') as f:
        f.write(text)


def _read_meta(root: str) -> Optional[dict]:
    """Return the parsed ``shapes_meta.json`` of ``root``, or None if there is none."""
    path = osp.join(root, META_FILE)
    if not osp.isfile(path):
        return None
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def _write_meta(root: str, params: dict, summary: Optional[dict]) -> None:
    """Write ``shapes_meta.json``; ``summary=None`` marks a generation in progress."""
    meta = dict(params=params, complete=summary is not None, summary=summary)
    _write_text(osp.join(root, META_FILE), json.dumps(meta, indent=2) + '\n')


def _generate_cached(root: str, params: dict, owned_dirs: Sequence[str],
                     generate: Callable[[], dict]) -> dict:
    """Run ``generate`` into ``root`` unless a complete dataset with ``params`` is already there.

    ``owned_dirs`` (relative to ``root``) are deleted before regenerating over an earlier shapes
    dataset. A root without ``shapes_meta.json`` whose owned folders exist is refused, so that a real
    dataset is never overwritten.
    """
    params = dict(params, generator_version=GENERATOR_VERSION)
    meta = _read_meta(root)
    if meta is not None and meta['complete'] and meta['params'] == params:
        return _summary_from_json(root, meta['summary'])
    existing = [d for d in owned_dirs if osp.exists(osp.join(root, d))]
    if meta is None and existing:
        raise FileExistsError(f'{root} holds {existing} but no {META_FILE}; refusing to overwrite data '
                              'that was not generated by mmcausal.datasets.shapes.')
    for d in existing:
        shutil.rmtree(osp.join(root, d))
    _write_meta(root, params, None)
    summary = generate()
    _write_meta(root, params, summary)
    return _summary_from_json(root, summary)


def _summary_from_json(root: str, summary: dict) -> dict:
    """Return the summary a ``make_*`` function returns: the stored one plus ``root``, classes a tuple.

    ``root`` is not stored, so that identical datasets in different folders are byte-identical.
    """
    return dict(root=root, **dict(summary, classes=tuple(summary['classes'])))


# ----------------------------------------------------------------------------------------------------
# ImageNet
# ----------------------------------------------------------------------------------------------------
IMAGENET_AREA_RANGE = (0.12, 0.3)  # shape area as a fraction of the image area


def render_classification_image(rng: np.random.Generator, image_size: int, label: int,
                                style: str = 'v1') -> Image.Image:
    """Render one image with a single shape of class ``label`` near the centre."""
    if style == 'v2':
        return render_scene_v2(rng, image_size, 'imagenet', label)[0]
    image = render_background(rng, image_size)
    _, area, angle = _random_shape(rng, image_size, IMAGENET_AREA_RANGE, label)
    radius = _circumradius(SHAPE_CLASSES[label], area)
    center = _random_center(rng, image_size, radius, spread=0.5)
    paint_polygon(rng, image, make_polygon(SHAPE_CLASSES[label], center, area, angle))
    return finish_image(rng, image)


def _imagenet_relpath(layout: str, label: int, index: int) -> str:
    """Return an image path relative to its split folder: ``<class>/<class>_<i>.JPEG`` or flat."""
    name = SHAPE_CLASSES[label]
    filename = f'{name}_{index}.JPEG'
    return filename if layout == 'annfile' else f'{name}/{filename}'


def _write_imagenet_split(root: str, split: str, num_per_class: int, image_size: int, seed: int,
                          layout: str, style: str = 'v1') -> int:
    """Write the images (and for ann-file layouts ``meta/<split>.txt``) of one split; return the count."""
    lines = []
    for label in range(len(SHAPE_CLASSES)):
        for index in range(num_per_class):
            relpath = _imagenet_relpath(layout, label, index)
            rng = _image_rng(seed, 'imagenet', split, label * num_per_class + index, style)
            _save_jpeg(render_classification_image(rng, image_size, label, style), osp.join(root, split, relpath))
            lines.append(f'{relpath} {label}\n')
    if layout != 'folder':
        _write_text(osp.join(root, 'meta', f'{split}.txt'), ''.join(lines))
    return len(lines)


def make_imagenet_like(root: str,
                       *,
                       num_train_per_class: int = 100,
                       num_val_per_class: int = 25,
                       image_size: int = 64,
                       seed: int = 0,
                       layout: str = 'both',
                       style: str = 'v1') -> dict:
    """Write (or reuse) an ImageNet-like classification dataset with one shape per image.

    Layouts (``<split>`` is ``train`` or ``val``, ``<class>`` a name of :data:`SHAPE_CLASSES`):

    * ``'folder'``: ``root/<split>/<class>/<class>_<i>.JPEG`` -- loadable by folder scanning.
    * ``'annfile'``: flat ``root/<split>/<class>_<i>.JPEG`` plus ``root/meta/<split>.txt`` with lines
      ``<class>_<i>.JPEG <label>`` -- loadable only through the ann file (like ImageNet's val set).
    * ``'both'``: the class folders plus ``root/meta/<split>.txt`` with lines
      ``<class>/<class>_<i>.JPEG <label>`` (as mmpretrain's ImageNet meta files) -- loadable either way.

    Labels are indices into :data:`SHAPE_CLASSES` (sorted, so folder scanning yields the same labels).
    Use ``mmpretrain.datasets.ImageNet(data_root=root, split=..., metainfo=dict(classes=SHAPE_CLASSES))``.

    Args:
        root: Output folder.
        num_train_per_class: Training images per class.
        num_val_per_class: Validation images per class.
        image_size: Side of the square images in pixels.
        seed: Random seed; the same seed gives byte-identical files.
        layout: ``'folder'``, ``'annfile'`` or ``'both'``.
        style: ``'v1'`` (default) or ``'v2'``, the independent draw (see the module docstring).

    Returns:
        dict: ``root``, ``classes``, ``layout``, ``image_size`` and ``num_images`` (per split).
    """
    if layout not in _IMAGENET_LAYOUTS:
        raise ValueError(f'layout must be one of {_IMAGENET_LAYOUTS}, got {layout!r}.')
    _check_style(style)
    params = _style_params(dict(dataset='imagenet', num_train_per_class=num_train_per_class,
                                num_val_per_class=num_val_per_class, image_size=image_size, seed=seed,
                                layout=layout), style)
    per_class = dict(train=num_train_per_class, val=num_val_per_class)

    def generate() -> dict:
        counts = {split: _write_imagenet_split(root, split, per_class[split], image_size, seed, layout, style)
                  for split in _SPLITS}
        return dict(classes=list(SHAPE_CLASSES), layout=layout, image_size=image_size,
                    num_images=counts)

    return _generate_cached(root, params, ('train', 'val', 'meta'), generate)


# ----------------------------------------------------------------------------------------------------
# ADE20K
# ----------------------------------------------------------------------------------------------------
SCENE_AREA_RANGE = (0.015, 0.1)  # shape area as a fraction of the image area (COCO, 128 px)
SEGMENTATION_AREA_RANGE = (0.05, 0.16)  # the same for ADE20K (64 px: shapes must span a few patches)
MAX_SHAPES = 4

ADE_UNLABELLED = 0
ADE_BACKGROUND = 1
ADE_FIRST_SHAPE = 2


def render_segmentation_sample(rng: np.random.Generator, image_size: int,
                               style: str = 'v1') -> Tuple[Image.Image, np.ndarray]:
    """Render a scene of 1-4 possibly overlapping shapes (v2: 1-3 separated) and its ADE20K label map.

    Later shapes are drawn over earlier ones; each shape gets a 1-pixel unlabelled (0) outline (v2: its
    drawn outline is unlabelled).
    """
    if style == 'v2':
        image, painted = render_scene_v2(rng, image_size, 'ade20k')
        label_map = np.full((image_size, image_size), ADE_BACKGROUND, dtype=np.uint8)
        for label, mask, ring, _ in painted:
            label_map[ring] = ADE_UNLABELLED
            label_map[mask] = ADE_FIRST_SHAPE + label
        return image, label_map
    image = render_background(rng, image_size)
    label_map = np.full((image_size, image_size), ADE_BACKGROUND, dtype=np.uint8)
    count = int(rng.integers(1, MAX_SHAPES + 1))
    for label, polygon in _place_shapes(rng, image_size, count, SEGMENTATION_AREA_RANGE, allow_overlap=True):
        mask = paint_polygon(rng, image, polygon)
        label_map[_outline(mask)] = ADE_UNLABELLED
        label_map[mask] = ADE_FIRST_SHAPE + label
    return finish_image(rng, image), label_map


def _write_ade20k_split(root: str, split: str, num_images: int, image_size: int, seed: int,
                        style: str = 'v1') -> int:
    """Write the images and label maps of one split; return the number of images."""
    folder = dict(train='training', val='validation')[split]
    for index in range(num_images):
        stem = f'ADE_{split}_{index + 1:08d}'
        image, label_map = render_segmentation_sample(_image_rng(seed, 'ade20k', split, index, style), image_size,
                                                       style)
        _save_jpeg(image, osp.join(root, 'images', folder, f'{stem}.jpg'))
        _save_label_png(label_map, osp.join(root, 'annotations', folder, f'{stem}.png'))
    return num_images


def make_ade20k_like(root: str,
                     *,
                     num_train: int = 128,
                     num_val: int = 16,
                     image_size: int = 64,
                     seed: int = 0,
                     style: str = 'v1') -> dict:
    """Write (or reuse) an ADE20K-like semantic segmentation dataset.

    Layout: ``root/images/{training,validation}/ADE_{train,val}_<8 digits>.jpg`` and label maps
    ``root/annotations/{training,validation}/<same stem>.png`` (single-channel uint8). Raw labels follow
    ADE20K: 0 = unlabelled (a 1-pixel outline around each shape), 1 = background, ``2 + i`` =
    ``SHAPE_CLASSES[i]``. With ``reduce_zero_label=True`` (ADE20K's setting) the classes are
    :data:`ADE20K_CLASSES` and unlabelled pixels become 255 (ignored).

    Note: mmseg's ``ADE20KDataset`` rejects ``metainfo`` classes that are not among its 150 ADE classes;
    load custom class names with ``BaseSegDataset(img_suffix='.jpg', seg_map_suffix='.png',
    reduce_zero_label=True, metainfo=dict(classes=ADE20K_CLASSES))`` or a subclass overriding ``METAINFO``.

    Args:
        root: Output folder.
        num_train: Training images.
        num_val: Validation images.
        image_size: Side of the square images in pixels.
        seed: Random seed; the same seed gives byte-identical files.
        style: ``'v1'`` (default) or ``'v2'``, the independent draw (see the module docstring).

    Returns:
        dict: ``root``, ``classes`` (after ``reduce_zero_label``), ``image_size`` and ``num_images``.
    """
    _check_style(style)
    params = _style_params(dict(dataset='ade20k', num_train=num_train, num_val=num_val, image_size=image_size,
                                seed=seed), style)
    counts = dict(train=num_train, val=num_val)

    def generate() -> dict:
        for split in _SPLITS:
            _write_ade20k_split(root, split, counts[split], image_size, seed, style)
        return dict(classes=list(ADE20K_CLASSES), image_size=image_size, num_images=counts)

    return _generate_cached(root, params, ('images', 'annotations'), generate)


# ----------------------------------------------------------------------------------------------------
# COCO
# ----------------------------------------------------------------------------------------------------
def render_detection_sample(rng: np.random.Generator, image_size: int,
                            style: str = 'v1') -> Tuple[Image.Image, List[Tuple[int, Polygon]]]:
    """Render a scene of 1-4 non-overlapping shapes (v2: 1-3 separated); return the image and
    ``(label, polygon)`` pairs (v2: the polygon of the fill, without the outline)."""
    if style == 'v2':
        image, painted = render_scene_v2(rng, image_size, 'coco')
        return image, [(label, polygon) for label, _, _, polygon in painted]
    image = render_background(rng, image_size)
    count = int(rng.integers(1, MAX_SHAPES + 1))
    shapes = _place_shapes(rng, image_size, count, SCENE_AREA_RANGE, allow_overlap=False)
    for _, polygon in shapes:
        paint_polygon(rng, image, polygon)
    return finish_image(rng, image), shapes


def coco_annotation(ann_id: int, image_id: int, label: int, polygon: Polygon) -> dict:
    """Return the COCO instance annotation of one polygon (``category_id = label + 1``)."""
    x0, y0 = polygon.min(axis=0)
    x1, y1 = polygon.max(axis=0)
    return dict(id=ann_id, image_id=image_id, category_id=label + 1,
                segmentation=[[round(float(v), 2) for v in polygon.reshape(-1)]],
                area=round(polygon_area(polygon), 2),
                bbox=[round(float(v), 2) for v in (x0, y0, x1 - x0, y1 - y0)], iscrowd=0)


def _coco_categories() -> List[dict]:
    """Return the COCO ``categories`` list, ids 1..4 in :data:`SHAPE_CLASSES` order."""
    return [dict(id=i + 1, name=name, supercategory='shape') for i, name in enumerate(SHAPE_CLASSES)]


def _write_coco_split(root: str, split: str, num_images: int, image_size: int, seed: int,
                      style: str = 'v1') -> Tuple[str, int]:
    """Write the images and ``annotations/instances_<split>2017.json``; return its path and #instances."""
    images, annotations = [], []
    for index in range(num_images):
        image_id = index + 1
        file_name = f'{image_id:012d}.jpg'
        image, shapes = render_detection_sample(_image_rng(seed, 'coco', split, index, style), image_size, style)
        _save_jpeg(image, osp.join(root, f'{split}2017', file_name))
        images.append(dict(id=image_id, file_name=file_name, height=image_size, width=image_size))
        for label, polygon in shapes:
            annotations.append(coco_annotation(len(annotations) + 1, image_id, label, polygon))
    ann_file = osp.join('annotations', f'instances_{split}2017.json')
    content = dict(info=dict(description='mmcausal synthetic shapes'), licenses=[], images=images,
                   annotations=annotations, categories=_coco_categories())
    _write_text(osp.join(root, ann_file), json.dumps(content))
    return ann_file, len(annotations)


def make_coco_like(root: str,
                   *,
                   num_train: int = 64,
                   num_val: int = 16,
                   image_size: int = 128,
                   seed: int = 0,
                   style: str = 'v1') -> dict:
    """Write (or reuse) a COCO-like instance detection/segmentation dataset.

    Layout: ``root/{train,val}2017/<12-digit image id>.jpg`` and
    ``root/annotations/instances_{train,val}2017.json`` with ``images`` (ids from 1), ``annotations``
    (ids from 1; one polygon per instance -- circles are 32-gons --, ``bbox = [x, y, w, h]`` of the
    polygon, ``area`` = polygon area, ``iscrowd = 0``) and ``categories`` (``id = 1 + i`` for
    ``SHAPE_CLASSES[i]``, supercategory ``'shape'``). Each image holds 1-4 non-overlapping instances of
    at least ~16 pixels, rendered from exactly the annotated polygons.
    Use ``mmdet.datasets.CocoDataset(metainfo=dict(classes=SHAPE_CLASSES), ...)``.

    Args:
        root: Output folder.
        num_train: Training images.
        num_val: Validation images.
        image_size: Side of the square images in pixels.
        seed: Random seed; the same seed gives byte-identical files.
        style: ``'v1'`` (default) or ``'v2'``, the independent draw (see the module docstring).

    Returns:
        dict: ``root``, ``classes``, ``image_size``, ``num_images``, ``num_instances`` and ``ann_files``
        (relative to ``root``), the last three per split.
    """
    _check_style(style)
    params = _style_params(dict(dataset='coco', num_train=num_train, num_val=num_val, image_size=image_size,
                                seed=seed), style)
    counts = dict(train=num_train, val=num_val)

    def generate() -> dict:
        written = {split: _write_coco_split(root, split, counts[split], image_size, seed, style) for split in _SPLITS}
        return dict(classes=list(SHAPE_CLASSES), image_size=image_size, num_images=counts,
                    num_instances={split: n for split, (_, n) in written.items()},
                    ann_files={split: path for split, (path, _) in written.items()})

    return _generate_cached(root, params, ('train2017', 'val2017', 'annotations'), generate)
