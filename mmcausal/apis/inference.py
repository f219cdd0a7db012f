"""One-call inference on images with the libraries' own inferencers (mmpretrain's ``ImageClassificationInferencer``,
mmseg's ``MMSegInferencer``, mmdet's ``DetInferencer``), picked by the config's ``default_scope``.

The inferencers load mmcausal configs (their ``custom_imports`` register our components) and checkpoints as they
are. What this module adds: the choice of inferencer, and class names for checkpoints whose meta has none (the
converted official files, a state dict saved by hand), taken from the config's test dataset instead of the
libraries' fallbacks (ImageNet, COCO, Cityscapes), and one call that writes the drawn prediction to a file.
"""
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

import mmcv
import numpy as np
from mmengine.config import Config
from mmengine.registry import DATASETS, DefaultScope

from mmcausal.utils.checkpoint_coverage import evaluation_loads
from mmcausal.utils.checkpoint_loading import load_checkpoint_file
from mmcausal.utils.errors import ConfigError

#: the default scopes whose library has an image inferencer
SCOPES = ('mmpretrain', 'mmseg', 'mmdet')


def config_dataset_meta(cfg: Config) -> dict:
    """``classes`` and ``palette`` (one colour per class) of the config's test dataset (its training set where it has
    none, as generation configs): its ``metainfo`` override, else its class's ``METAINFO`` (e.g. ``ADE20KDataset``'s
    150 classes); empty when neither names classes."""
    loader = cfg.get('test_dataloader') or cfg.get('val_dataloader') or cfg.get('train_dataloader') or {}
    dataset = loader.get('dataset', {})
    while 'dataset' in dataset:  # wrappers (RepeatDataset, ...)
        dataset = dataset['dataset']
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        dataset_class = DATASETS.get(dataset.get('type')) if dataset.get('type') else None
    meta = dict(getattr(dataset_class, 'METAINFO', {}) or {})
    meta.update(dataset.get('metainfo') or {})
    if not meta.get('classes'):
        return {}
    classes, palette = list(meta['classes']), [tuple(colour) for colour in meta.get('palette') or []]
    if len(palette) != len(classes):  # as mmseg's datasets do without a palette: fixed random colours
        palette = [tuple(colour) for colour in np.random.RandomState(42).randint(0, 255, (len(classes), 3)).tolist()]
    return dict(classes=classes, palette=palette)


def checkpoint_has_classes(checkpoint: Optional[str]) -> bool:
    """Whether the checkpoint's meta names its classes (``dataset_meta``, or mmcv 1.x's ``CLASSES``)."""
    if checkpoint is None:
        return False
    if '://' in checkpoint:  # a URL: left to the library (its loader downloads and caches it)
        return True
    meta = load_checkpoint_file(checkpoint, map_location='cpu').get('meta') or {}
    return bool((meta.get('dataset_meta') or {}).get('classes') or meta.get('CLASSES'))


def build_inferencer(config: str, checkpoint: Optional[str] = None, device: Optional[str] = None) -> Any:
    """The inferencer of the config's library, with ``checkpoint``'s weights (``None``: the config's init)."""
    cfg = Config.fromfile(config)
    scope = cfg.get('default_scope')
    if scope not in SCOPES:
        raise ConfigError(f'{config} has default_scope={scope!r}; image inference needs one of {", ".join(SCOPES)} '
                          '(a classification, segmentation or detection config).')
    model_type = cfg.model.get('type')
    if scope == 'mmpretrain' and model_type != 'ImageClassifier':
        raise ConfigError(f"{config} builds model type {model_type!r}, which has no image inferencer (mmpretrain's "
                          'is for ImageClassifier configs); use a classification, segmentation or detection config.')
    meta = {} if checkpoint_has_classes(checkpoint) else config_dataset_meta(cfg)
    with DefaultScope.overwrite_default_scope(scope), evaluation_loads():  # transforms are looked up in the scope
        return _library_inferencer(scope, cfg, checkpoint, device, meta)


def _library_inferencer(scope: str, cfg: Config, checkpoint: Optional[str], device: Optional[str], meta: dict) -> Any:
    if scope == 'mmpretrain':
        from mmpretrain import ImageClassificationInferencer
        return ImageClassificationInferencer(cfg, pretrained=checkpoint or False, device=device,
                                             classes=meta.get('classes'))
    if scope == 'mmseg':
        from mmseg.apis import MMSegInferencer
        inferencer = MMSegInferencer(cfg, weights=checkpoint, device=device, **meta)
    else:
        from mmdet.apis import DetInferencer
        inferencer = DetInferencer(cfg, weights=checkpoint, device=device, show_progress=False)
    if meta:  # both draw with the model's dataset_meta, which they take only from the checkpoint (else Cityscapes
        inferencer.model.dataset_meta = meta  # / COCO classes)
        inferencer.visualizer.dataset_meta = meta
    return inferencer


def infer_and_draw(inferencer: Any, image: str, out_file: str) -> dict:
    """Run ``inferencer`` on one image file, write the drawn prediction to ``out_file`` and return the
    inferencer's result for it (class scores, a label map, or boxes / labels / scores / masks)."""
    Path(out_file).parent.mkdir(parents=True, exist_ok=True)
    if type(inferencer).__name__ == 'ImageClassificationInferencer':  # draws only into a folder
        with tempfile.TemporaryDirectory() as folder:
            result = inferencer(image, show_dir=folder)[0]
            shutil.move(str(Path(folder) / f'{Path(image).stem}.png'), out_file)
        return result
    output = inferencer(image, return_vis=True)
    drawn, predictions = output['visualization'], output['predictions']
    if isinstance(drawn, list):  # mmdet: lists of one; mmseg: the single image's entries themselves
        drawn, predictions = drawn[0], predictions[0]
    mmcv.imwrite(np.ascontiguousarray(drawn[..., ::-1]), out_file)  # drawn is RGB
    return predictions
