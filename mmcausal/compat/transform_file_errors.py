"""A data transform's file error names the file, where the transform runs (also in a DataLoader worker).

Patches: ``BaseTransform.__call__`` (mmcv 2.1), which every data transform of mmpretrain, mmseg and mmdet runs
through: a file error (a missing, empty, truncated or undecodable image or segmentation map) is raised as
:class:`~mmcausal.utils.dataset_check.DatasetFormatError` naming the file
(:func:`mmcausal.utils.user_errors.sample_loading_error`); other errors pass unchanged, with the original chained as
the cause.

Why: mmcv's ``LoadImageFromFile`` and the loaders of mmseg / mmdet raise OpenCV's ``!buf.empty()`` or PIL's
``cannot identify image file`` without the file's path, and torch re-raises a DataLoader worker's error in the main
process from its message alone, so the file (known only from the transform's frame) is lost.

When it can go: when the OpenMMLab loaders name the file in their errors (not fixed upstream).
"""
import functools
from typing import Any

from .patching import is_shim, mark_shim


def patch_transform_file_errors() -> None:
    """Raise a data transform's file error as ``DatasetFormatError`` naming the file (see the module)."""
    from mmcv.transforms import BaseTransform

    from mmcausal.utils.user_errors import sample_loading_error

    original = BaseTransform.__call__
    if is_shim(original):
        return

    @functools.wraps(original)
    def __call__(self, results: dict) -> Any:
        try:
            return original(self, results)
        except Exception as error:
            named = sample_loading_error(error)
            if named is None:
                raise
            raise named from error

    BaseTransform.__call__ = mark_shim(__call__)
