"""Data transforms of the generation recipes."""
import numpy as np
from mmcv.transforms import BaseTransform
from PIL import Image

from mmcausal.registry import TRANSFORMS
from mmcausal.utils.validation import ConfigValueError


def adm_center_crop(image: np.ndarray, size: int) -> np.ndarray:
    """ADM's centre crop (DiT / SiT training data) of an ``(H, W[, C])`` uint8 image to ``(size, size[, C])``.

    While the short side is at least ``2 * size`` the image is halved (floor of each side) with PIL's BOX filter;
    then it is resized with BICUBIC so that the short side is ``size`` (each side ``round(side * size / short)``) and
    the central ``size x size`` is cut out (offsets floored). The halving anti-aliases large downscales.
    """
    pil = Image.fromarray(image)
    while min(pil.size) >= 2 * size:
        pil = pil.resize((pil.width // 2, pil.height // 2), resample=Image.BOX)
    ratio = size / min(pil.size)
    pil = pil.resize((round(pil.width * ratio), round(pil.height * ratio)), resample=Image.BICUBIC)
    array = np.array(pil)
    top, left = (array.shape[0] - size) // 2, (array.shape[1] - size) // 2
    return np.ascontiguousarray(array[top:top + size, left:left + size])


@TRANSFORMS.register_module()
class ADMCenterCrop(BaseTransform):
    """:func:`adm_center_crop` of ``results['img']`` (uint8, any channel order) to ``size x size``.

    Required keys: ``img``. Modified keys: ``img``, ``img_shape``.
    """

    def __init__(self, size: int = 256) -> None:
        if not isinstance(size, int) or size < 1:
            raise ConfigValueError(f'ADMCenterCrop size must be a positive int, got {size!r}.')
        self.size = size

    def transform(self, results: dict) -> dict:
        results['img'] = adm_center_crop(results['img'], self.size)
        results['img_shape'] = results['img'].shape[:2]
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(size={self.size})'


__all__ = ['ADMCenterCrop', 'adm_center_crop']
