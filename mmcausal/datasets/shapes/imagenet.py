"""Writer of the ImageNet-like classification dataset: one centred-ish shape per image."""
import os.path as osp

from .cache import generate_cached, save_jpeg, write_text
from .geometry import SHAPE_CLASSES
from .styles import SPLITS, get_style, image_rng, style_params

_IMAGENET_LAYOUTS = ('folder', 'annfile', 'both')


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
            rng = image_rng(seed, 'imagenet', split, label * num_per_class + index, style)
            save_jpeg(get_style(style).render_classification(rng, image_size, label), osp.join(root, split, relpath))
            lines.append(f'{relpath} {label}\n')
    if layout != 'folder':
        write_text(osp.join(root, 'meta', f'{split}.txt'), ''.join(lines))
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
        style: ``'v1'`` (default), ``'v2'`` or ``'v3'``, independent draws (see :mod:`.styles`).

    Returns:
        dict: ``root``, ``classes``, ``layout``, ``image_size`` and ``num_images`` (per split).
    """
    if layout not in _IMAGENET_LAYOUTS:
        raise ValueError(f'layout must be one of {_IMAGENET_LAYOUTS}, got {layout!r}.')
    get_style(style)
    params = style_params(dict(dataset='imagenet', num_train_per_class=num_train_per_class,
                                num_val_per_class=num_val_per_class, image_size=image_size, seed=seed,
                                layout=layout), style)
    per_class = dict(train=num_train_per_class, val=num_val_per_class)

    def generate() -> dict:
        counts = {split: _write_imagenet_split(root, split, per_class[split], image_size, seed, layout, style)
                  for split in SPLITS}
        return dict(classes=list(SHAPE_CLASSES), layout=layout, image_size=image_size,
                    num_images=counts)

    return generate_cached(root, params, ('train', 'val', 'meta'), generate)


