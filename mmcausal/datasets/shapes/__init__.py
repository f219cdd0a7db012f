"""Tiny synthetic "shapes" datasets in the on-disk layouts of ImageNet, ADE20K, COCO, CIFAR and image-text data.

The datasets let configs, tests and smoke trainings run through the stock dataset classes of
mmpretrain (``ImageNet``/``CustomDataset``, the ``CIFAR10``/``CIFAR100`` loaders), mmsegmentation
(``ADE20KDataset``/``BaseSegDataset``) and mmdetection (``CocoDataset``) without downloading anything.

Every image holds one or more filled shapes of the classes in :data:`SHAPE_CLASSES` on a random background.
Colours, sizes, positions and rotations are random and independent of the class; the shapes of all classes are
drawn with the same area distribution, so only the *form* tells the class apart. The same polygons give the
images, the segmentation maps and the COCO annotations (:mod:`.geometry`).

Layouts and label conventions (the writers :mod:`.imagenet`, :mod:`.ade20k`, :mod:`.coco`, :mod:`.cifar`):

* :func:`make_imagenet_like` -- one centred-ish shape per image, label = index in :data:`SHAPE_CLASSES`.
* :func:`make_ade20k_like` -- ``L`` PNG maps with 0 = unlabelled (the outline around every shape),
  1 = background, ``2 + i`` = ``SHAPE_CLASSES[i]``. With ``reduce_zero_label=True`` the classes are
  :data:`ADE20K_CLASSES` and 0 becomes 255 (ignore).
* :func:`make_coco_like` -- non-overlapping shapes with polygon annotations, ``category_id = 1 + i``
  for ``SHAPE_CLASSES[i]``.
* :func:`make_cifar_like` -- 32 x 32 images of one shape in the python-pickle files of CIFAR-10 or CIFAR-100
  (:mod:`.cifar`), label = index in :data:`SHAPE_CLASSES`.
* :func:`make_captioned_like` -- 1-3 shapes of one class in one named colour per image with an English caption
  (:mod:`.captions`), as img2dataset's folder layout, an OpenCLIP tsv, webdataset shards and an mmpretrain ann file;
  its words are :data:`CAPTION_WORDS`.

Three independent styles (``style=``, :mod:`.styles`) draw the same classes into the same file layouts, each
from its own random streams: ``'v1'`` (default, :mod:`.style_v1`: light fills on dark textures, +-20 degree
rotations), ``'v2'`` (:mod:`.style_v2`: the opposite contrast, gradients, outlines, other sizes and counts) and
``'v3'`` (:mod:`.style_v3`: either polarity per image, any rotation, noise of std 12), for checking that a
recipe carries over beyond the draw it was tuned on.

Generation is deterministic: each image draws from its own ``numpy.random.default_rng`` seeded with
``(seed, dataset, split, index[, style])``, so the same seed gives byte-identical files (for a given numpy,
Pillow and libjpeg). A ``shapes_meta.json`` holding the parameters is written last (:mod:`.cache`); calling a
``make_*`` function again with the same parameters returns the stored summary without touching the files.
Only numpy, Pillow and the standard library are used (no torch), so the generator can run before the full
environment exists.
"""
from .ade20k import ADE20K_CLASSES, make_ade20k_like
from .captions import CAPTION_WORDS, make_captioned_like
from .cifar import CIFAR_LAYOUTS, make_cifar_like
from .coco import make_coco_like
from .geometry import SHAPE_CLASSES, make_polygon, polygon_area, polygon_mask
from .imagenet import make_imagenet_like
from .styles import STYLES

__all__ = [
    'ADE20K_CLASSES', 'CAPTION_WORDS', 'CIFAR_LAYOUTS', 'SHAPE_CLASSES', 'STYLES', 'make_ade20k_like',
    'make_captioned_like', 'make_cifar_like', 'make_coco_like', 'make_imagenet_like', 'make_polygon', 'polygon_area',
    'polygon_mask'
]
