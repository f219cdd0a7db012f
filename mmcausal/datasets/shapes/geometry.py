"""Geometry of the shapes: unit polygons of the classes, rasterisation, outlines and random placement.

Shapes are polygons (circles are 32-gons) rasterised by sampling pixel centres: a pixel ``(row, col)`` belongs to
a shape iff the point ``(col + 0.5, row + 0.5)`` lies inside the polygon (the COCO convention).
"""
from typing import Callable, List, Tuple

import numpy as np

#: Shape classes, in label order. Sorted alphabetically on purpose: mmpretrain's folder scanning
#: assigns labels in sorted folder-name order, so the folder and ann-file layouts agree.
SHAPE_CLASSES: Tuple[str, ...] = ('circle', 'cross', 'square', 'triangle')
CIRCLE_VERTICES = 32

Polygon = np.ndarray  # (K, 2) float array of (x, y) vertices in pixel coordinates
#: ``(label, area, angle)`` of one shape to place (class index, pixels squared, radians).
ShapeDraw = Tuple[int, float, float]


def unit_polygon(shape: str) -> Polygon:
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
    verts = unit_polygon(shape) * np.sqrt(area) @ rotation.T + np.asarray(center)
    return np.round(verts, 2)


def circumradius(shape: str, area: float) -> float:
    """Return the largest vertex distance from the centre of ``shape`` with the given area."""
    return float(np.linalg.norm(unit_polygon(shape), axis=1).max() * np.sqrt(area))


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


def outline(mask: np.ndarray) -> np.ndarray:
    """Return the pixels 8-adjacent to ``mask`` but outside it (a 1-pixel outer boundary)."""
    padded = np.pad(mask, 1)
    h, w = mask.shape
    dilated = np.zeros_like(mask)
    for dy in range(3):
        for dx in range(3):
            dilated |= padded[dy:dy + h, dx:dx + w]
    return dilated & ~mask


def ring(mask: np.ndarray, width: int) -> np.ndarray:
    """Return the pixels within ``width`` 8-neighbour steps outside ``mask``."""
    grown = mask
    for _ in range(width):
        grown = grown | outline(grown)
    return grown & ~mask


def random_center(rng: np.random.Generator, image_size: int, radius: float, spread: float = 1.0) -> np.ndarray:
    """Draw a centre keeping a disc of ``radius`` inside the image; ``spread`` < 1 pulls it inwards."""
    half = (image_size / 2 - radius) * spread
    return image_size / 2 + rng.uniform(-half, half, size=2)


def place_shapes(rng: np.random.Generator, image_size: int, count: int, draw: Callable[[], ShapeDraw],
                 allow_overlap: bool, tries: int = 50, gap: float = 0.0) -> List[Tuple[int, Polygon]]:
    """Draw up to ``count`` random shapes inside the image as ``(label, polygon)`` pairs.

    ``draw()`` gives each shape's ``(label, area, angle)``, once per shape, so the class frequencies stay uniform
    however crowded the image is. Without ``allow_overlap``, a shape whose circumscribed disc comes closer than
    ``gap`` pixels to an earlier one is moved to a new random position up to ``tries`` times and dropped if it
    still does not fit (the first shape always fits).
    """
    placed: List[Tuple[int, Polygon]] = []
    discs: List[Tuple[np.ndarray, float]] = []
    for _ in range(count):
        label, area, angle = draw()
        radius = circumradius(SHAPE_CLASSES[label], area)
        for _ in range(tries):
            center = random_center(rng, image_size, radius)
            if allow_overlap or all(np.linalg.norm(center - c) > radius + r + gap for c, r in discs):
                placed.append((label, make_polygon(SHAPE_CLASSES[label], center, area, angle)))
                discs.append((center, radius))
                break
    return placed


def centred_shape(rng: np.random.Generator, image_size: int, label: int, area: float, angle: float) -> Polygon:
    """Return the polygon of one shape of class ``label`` placed near the centre (classification images)."""
    radius = circumradius(SHAPE_CLASSES[label], area)
    center = random_center(rng, image_size, radius, spread=0.5)
    return make_polygon(SHAPE_CLASSES[label], center, area, angle)
