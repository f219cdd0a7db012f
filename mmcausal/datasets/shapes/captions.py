"""Writer of an image-text (caption) dataset of the shapes classes, for contrastive image-text pre-training.

Each image holds 1-3 shapes of one class of :data:`SHAPE_CLASSES`, all filled with one named colour of
:data:`COLOURS` (plus a jitter of up to +-:data:`COLOUR_JITTER` per channel), on the background of ``style``
(:mod:`.styles`). The class of image ``i`` is ``i % 4``, so the classes are balanced; the count is uniform in 1-3;
the colour is uniform among the named colours that stand out from the background under the shapes (at least
:data:`MIN_COLOUR_DISTANCE` from 90% of those pixels; on light backgrounds white rarely does). A single
shape has the area range of the ImageNet-like images (``style_v1.AREA_RANGES['imagenet']``) and is placed near the
centre; two or three shapes have :data:`MULTI_AREA_RANGE` and are kept apart (``place_shapes(allow_overlap=False)``,
the scene redrawn up to :data:`PLACE_ATTEMPTS` times until all fit; the caption counts the shapes placed). Rotation,
outline and pixel noise follow the style.

The caption is one of :data:`TEMPLATES` (drawn per image) naming the count, colour (left out with probability
:data:`OMIT_COLOUR`) and class, lower-case words and a final ``.``, e.g. ``a photo of two red triangles.``, ``there
is an orange circle.``, ``three blue squares on a dark background.``, ``a cross.``; :data:`CAPTION_WORDS` lists
every word a caption (or the zero-shot prompt ``a photo of a {class}.``) can hold, for a word-level tokenizer.

Layout under ``root`` (``<split>`` is ``train`` or ``val``, ``<i>`` six digits)::

    images/<split>/<split>_<i>.jpg    the image
    images/<split>/<split>_<i>.txt    its caption (img2dataset's folder layout)
    <split>.tsv                       header ``filepath<TAB>title``, then one ``images/...jpg<TAB>caption`` per image
                                      (OpenCLIP's CsvDataset: --csv-img-key filepath --csv-caption-key title
                                      --csv-separator "\\t")
    meta/<split>.txt                  ``images/<split>/<split>_<i>.jpg <label>`` lines (mmpretrain's ann file: the
                                      val split is also a classification set for zero-shot evaluation)
    shards/<split>-<n>.tar            webdataset shards with ``<split>_<i>.jpg``, ``.txt`` and ``.cls`` members
                                      (``num_shards`` for train, one for val)
"""
import io
import os
import os.path as osp
import tarfile
from typing import Dict, Optional, Tuple

import numpy as np
from PIL import Image

from . import style_v1, style_v2, style_v3
from .cache import generate_cached, save_jpeg, write_text
from .drawing import finish_image, linear_gradient
from .geometry import SHAPE_CLASSES, centred_shape, place_shapes, polygon_mask, ring
from .styles import SPLITS, get_style, image_rng, style_params

#: Named fill colours (RGB): saturated and bright, far apart from each other.
COLOURS: Dict[str, Tuple[int, int, int]] = {
    'red': (235, 55, 50),
    'green': (60, 205, 75),
    'blue': (55, 110, 250),
    'yellow': (245, 225, 55),
    'white': (245, 245, 245),
    'orange': (250, 145, 30),
    'purple': (170, 80, 235),
    'cyan': (50, 225, 230),
}
COLOUR_JITTER = 12.  # per-channel uniform jitter of a named colour
MIN_COLOUR_DISTANCE = 90.  # L2 in RGB between the fill and most of the background under the shapes
MAX_SHAPES = 3
#: Area of each of two or three shapes, as a fraction of the image area (one shape: the ImageNet-like range).
MULTI_AREA_RANGE = (0.05, 0.1)
GAP = 2.0  # pixels between the circumscribed discs of two shapes (plus twice the outline width)
PLACE_ATTEMPTS = 5  # scenes drawn until all shapes fit; the caption counts those of the last one
NUMBER_WORDS = ('a', 'two', 'three')
#: Probability that a caption leaves the colour out (``a photo of two triangles.``): captions name the class alone
#: as often as web captions name an object without its attributes.
OMIT_COLOUR = 1 / 2
PLURALS = dict(circle='circles', cross='crosses', square='squares', triangle='triangles')
#: Caption templates: ``{things}`` is the noun phrase (``a red circle``, ``two blue squares``), ``{be}`` ``is`` or
#: ``are``, ``{tone}`` ``dark`` or ``light`` (the background's mean luma below or above 128).
TEMPLATES = (
    'a photo of {things}.',
    '{things}.',
    'a picture of {things}.',
    'an image of {things}.',
    'a drawing of {things}.',
    'there {be} {things}.',
    '{things} on a {tone} background.',
)
ZERO_SHOT_PROMPT = 'a photo of a {}.'
LUMA = np.array([0.299, 0.587, 0.114])


def _vocabulary() -> Tuple[str, ...]:
    words = set(ZERO_SHOT_PROMPT.format('').replace('.', ' ').split())
    for template in TEMPLATES:
        words.update(w for w in template.replace('.', ' ').split() if not w.startswith('{'))
    words.update(('an', 'is', 'are', 'dark', 'light', *NUMBER_WORDS, *COLOURS, *SHAPE_CLASSES, *PLURALS.values()))
    return tuple(sorted(words))


#: Every word of any caption and of the prompt ``a photo of a {class}.``, sorted.
CAPTION_WORDS: Tuple[str, ...] = _vocabulary()


def caption_text(template: str, count: int, colour: Optional[str], shape: str, tone: str) -> str:
    """Fill ``template`` for ``count`` shapes of class ``shape`` in ``colour`` (``None``: not named) on a ``tone``
    background."""
    described = shape if count == 1 else PLURALS[shape]
    if colour is not None:
        described = f'{colour} {described}'
    if count == 1:
        things = f'{"an" if described[0] in "aeiou" else "a"} {described}'
    else:
        things = f'{NUMBER_WORDS[count - 1]} {described}'
    return template.format(things=things, be='is' if count == 1 else 'are', tone=tone)


def _backdrop(rng: np.random.Generator, size: int, style: str) -> Tuple[np.ndarray, float, int, float]:
    """``(background (size, size, 3) float, noise std, outline width (0: none), largest rotation)`` of ``style``."""
    if style == 'v1':
        return style_v1.render_background(rng, size), style_v1.NOISE_STD, 0, style_v1.MAX_ROTATION
    if style == 'v2':
        background = style_v2.render_background(rng, size)
        width = int(rng.integers(style_v2.OUTLINE_WIDTH[0], style_v2.OUTLINE_WIDTH[1] + 1))
        return background, rng.uniform(*style_v2.NOISE_STD), width, style_v2.MAX_ROTATION
    level = rng.uniform(style_v3.BACKGROUND_LEVELS['light fill'][0], style_v3.BACKGROUND_LEVELS['dark fill'][1])
    spread = style_v3.GRADIENT_SPREAD
    ends = np.stack([style_v3.colour_of_luma(rng, level + rng.uniform(-spread, spread)) for _ in range(2)])
    width = int(rng.integers(style_v3.OUTLINE_WIDTH[0], style_v3.OUTLINE_WIDTH[1] + 1))
    return linear_gradient(rng, size, ends), style_v3.NOISE_STD, width, np.pi


def _pick_named_colour(rng: np.random.Generator, under: np.ndarray) -> str:
    """A name of :data:`COLOURS`, uniform among those at least :data:`MIN_COLOUR_DISTANCE` from 90% of ``under``
    (``(N, 3)``); the farthest one if none is."""
    names = list(COLOURS)
    scores = [float(np.percentile(np.linalg.norm(under - np.array(COLOURS[n]), axis=1), 10)) for n in names]
    fitting = [n for n, s in zip(names, scores) if s >= MIN_COLOUR_DISTANCE]
    return str(rng.choice(fitting)) if fitting else names[int(np.argmax(scores))]


def render_captioned(rng: np.random.Generator, image_size: int, label: int,
                     style: str = 'v1') -> Tuple[Image.Image, str]:
    """One image of 1-3 shapes of class ``label`` in one named colour, and its caption."""
    background, noise_std, outline_width, max_rotation = _backdrop(rng, image_size, style)
    count = int(rng.integers(1, MAX_SHAPES + 1))
    if count == 1:
        area = rng.uniform(*style_v1.AREA_RANGES['imagenet']) * image_size**2
        polygons = [centred_shape(rng, image_size, label, area, rng.uniform(-max_rotation, max_rotation))]
    else:
        def draw() -> Tuple[int, float, float]:
            area = rng.uniform(*MULTI_AREA_RANGE) * image_size**2
            return label, area, rng.uniform(-max_rotation, max_rotation)

        for _ in range(PLACE_ATTEMPTS):  # a crowded draw drops shapes: draw the whole scene again
            polygons = [p for _, p in place_shapes(rng, image_size, count, draw, allow_overlap=False,
                                                   gap=GAP + 2 * outline_width)]
            if len(polygons) == count:
                break
    masks = [polygon_mask(p, image_size, image_size) for p in polygons]
    borders = [ring(m, outline_width) if outline_width else np.zeros_like(m) for m in masks]
    union = np.logical_or.reduce([m | b for m, b in zip(masks, borders)])
    colour = _pick_named_colour(rng, background[union])
    image = background.copy()
    for mask, border in zip(masks, borders):
        if outline_width:
            image[border] = rng.uniform(0, 255, size=3)
        image[mask] = np.clip(np.array(COLOURS[colour]) + rng.uniform(-COLOUR_JITTER, COLOUR_JITTER, size=3), 0, 255)
    tone = 'dark' if float((background.reshape(-1, 3) @ LUMA).mean()) < 128 else 'light'
    named = None if rng.random() < OMIT_COLOUR else colour
    caption = caption_text(TEMPLATES[int(rng.integers(len(TEMPLATES)))], len(polygons), named, SHAPE_CLASSES[label],
                           tone)
    return finish_image(rng, image, noise_std), caption


def _add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    """Add ``data`` as the regular file ``name`` with fixed metadata (byte-identical archives)."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def shard_pattern(split: str, num_shards: int) -> str:
    """``shards/<split>-{000000..<num_shards - 1>}.tar``: the brace pattern of a split's shards."""
    return f'shards/{split}-{{{0:06d}..{num_shards - 1:06d}}}.tar'


def _write_split(root: str, split: str, num: int, image_size: int, seed: int, style: str, num_shards: int) -> None:
    """Write the images, captions, tsv, ann file and shards of one split."""
    rows, lines, samples = ['filepath\ttitle\n'], [], []
    for index in range(num):
        label = index % len(SHAPE_CLASSES)
        image, caption = render_captioned(image_rng(seed, 'captions', split, index, style), image_size, label,
                                          style)
        key = f'{split}_{index:06d}'
        relpath = f'images/{split}/{key}.jpg'
        save_jpeg(image, osp.join(root, relpath))
        write_text(osp.join(root, 'images', split, f'{key}.txt'), caption)
        rows.append(f'{relpath}\t{caption}\n')
        lines.append(f'{relpath} {label}\n')
        samples.append((key, relpath, caption, label))
    write_text(osp.join(root, f'{split}.tsv'), ''.join(rows))
    write_text(osp.join(root, 'meta', f'{split}.txt'), ''.join(lines))
    os.makedirs(osp.join(root, 'shards'), exist_ok=True)
    for number, indices in enumerate(np.array_split(np.arange(num), num_shards)):
        with tarfile.open(osp.join(root, 'shards', f'{split}-{number:06d}.tar'), 'w',
                          format=tarfile.USTAR_FORMAT) as tar:
            for i in indices:
                key, relpath, caption, label = samples[i]
                with open(osp.join(root, relpath), 'rb') as file:
                    _add_member(tar, f'{key}.jpg', file.read())
                _add_member(tar, f'{key}.txt', caption.encode('utf-8'))
                _add_member(tar, f'{key}.cls', str(label).encode('ascii'))


def make_captioned_like(root: str,
                        *,
                        num_train: int = 4800,
                        num_val: int = 400,
                        image_size: int = 64,
                        seed: int = 0,
                        style: str = 'v1',
                        num_shards: int = 4) -> dict:
    """Write (or reuse) the shapes caption dataset (layout in the module docstring).

    Read it with ``mmcausal.datasets.ImageTextDataset(data_root=root, ann_file='train.tsv')`` (or
    ``data_prefix=dict(img_path='images/train')``, or OpenCLIP's CsvDataset), the shards with
    ``mmcausal.datasets.WebDatasetImageText(data_root=root, urls=summary['shards']['train'], ...)``, and the val
    split as a classification set with ``mmpretrain.datasets.CustomDataset(data_root=root, ann_file='meta/val.txt',
    metainfo=dict(classes=SHAPE_CLASSES))``.

    Args:
        root: Output folder.
        num_train: Training images (class ``i % 4`` for image ``i``).
        num_val: Validation images.
        image_size: Side of the square images in pixels.
        seed: Random seed; the same seed gives byte-identical files.
        style: ``'v1'`` (default), ``'v2'`` or ``'v3'``: the backgrounds, outlines and noise of that style.
        num_shards: Number of training shards (the val split has one).

    Returns:
        dict: ``root``, ``classes``, ``image_size``, ``num_images``, ``tsv``, ``ann_files`` and ``shards``
        (brace patterns relative to ``root``) per split, and ``words`` (:data:`CAPTION_WORDS`).
    """
    get_style(style)
    if min(num_train, num_val) < 1:
        raise ValueError(f'num_train and num_val must be at least 1, got {num_train} and {num_val}.')
    if not 1 <= num_shards <= num_train:
        raise ValueError(f'num_shards must be in 1..num_train ({num_train}), got {num_shards}.')
    params = style_params(dict(dataset='captions', num_train=num_train, num_val=num_val, image_size=image_size,
                               seed=seed, num_shards=num_shards), style)
    counts = dict(train=num_train, val=num_val)
    shards = dict(train=num_shards, val=1)

    def generate() -> dict:
        for split in SPLITS:
            _write_split(root, split, counts[split], image_size, seed, style, shards[split])
        return dict(classes=list(SHAPE_CLASSES), image_size=image_size, num_images=counts,
                    tsv={s: f'{s}.tsv' for s in SPLITS}, ann_files={s: f'meta/{s}.txt' for s in SPLITS},
                    shards={s: shard_pattern(s, shards[s]) for s in SPLITS}, words=list(CAPTION_WORDS))

    return generate_cached(root, params, ('images', 'meta', 'shards'), generate)

