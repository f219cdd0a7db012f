"""Pixel-level drawing shared by the styles: rotated coordinate grids, contrasting colours, the final noise."""
from typing import NamedTuple, Optional, Tuple

import numpy as np
from PIL import Image

from .geometry import Polygon


class PaintedShape(NamedTuple):
    """One shape drawn into a scene: class index, polygon, its filled pixels and the pixels around it that the
    segmentation maps leave unlabelled (its outline); both masks ``(H, W)`` bool."""
    label: int
    polygon: Polygon
    fill: np.ndarray
    border: np.ndarray


def rotated_coords(size: int, angle: float) -> Tuple[np.ndarray, np.ndarray]:
    """Return pixel-centre coordinates ``(u, v)``, each ``(size, size)``, of a square grid rotated by ``angle``."""
    y, x = np.mgrid[0:size, 0:size] + 0.5
    return x * np.cos(angle) + y * np.sin(angle), -x * np.sin(angle) + y * np.cos(angle)


def linear_gradient(rng: np.random.Generator, size: int, colours: np.ndarray) -> np.ndarray:
    """Return a ``(size, size, 3)`` float image blending ``colours[0]`` into ``colours[1]`` (``(2, 3)``) along a
    direction drawn uniformly in [0, 2 pi)."""
    u, _ = rotated_coords(size, rng.uniform(0, 2 * np.pi))
    t = ((u - u.min()) / (u.max() - u.min()))[..., None]
    return (1 - t) * colours[0] + t * colours[1]


def pick_colour(rng: np.random.Generator, under: np.ndarray, colour_range: Tuple[float, float],
                min_distance: float, tries: int = 32) -> np.ndarray:
    """Draw a uniformly random RGB colour in ``colour_range`` that stands out from ``under`` (``(N, 3)``).

    A colour is accepted when at least 90% of ``under`` is farther than ``min_distance``; otherwise the
    best of ``tries`` draws is used. The colour never depends on the shape class.
    """
    best: Optional[np.ndarray] = None
    best_score = -1.0
    for _ in range(tries):
        colour = rng.uniform(*colour_range, size=3)
        score = float(np.percentile(np.linalg.norm(under - colour, axis=1), 10))
        if score >= min_distance:
            return colour
        if score > best_score:
            best, best_score = colour, score
    return best


def finish_image(rng: np.random.Generator, image: np.ndarray, noise_std: float) -> Image.Image:
    """Add Gaussian pixel noise (std ``noise_std``) and convert a float image to an 8-bit RGB PIL image."""
    noisy = image + rng.normal(0, noise_std, size=image.shape)
    return Image.fromarray(np.clip(np.round(noisy), 0, 255).astype(np.uint8))
