"""Say so when a detector predicts nothing at all on a whole evaluation split.

mmdet's ``CocoMetric`` then logs "The testing results of the whole dataset is empty", reports no metric
and the run exits 0, which reads like a crash of the metric rather than what it is: every score stayed
below the test threshold, i.e. the model predicts background everywhere.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner import Runner

from mmcausal.registry import HOOKS


def find_score_threshold(test_cfg: Any, where: str = 'model.test_cfg') -> Optional[Tuple[str, float]]:
    """``(config key, value)`` of the score threshold in a detector's ``test_cfg`` (``rcnn.score_thr`` for
    two-stage detectors, ``score_thr`` for one-stage ones), or ``None``."""
    if not isinstance(test_cfg, dict):
        return None
    if 'score_thr' in test_cfg:
        return f'{where}.score_thr', test_cfg['score_thr']
    for key in ('rcnn', *sorted(key for key in test_cfg if key != 'rcnn')):
        found = find_score_threshold(test_cfg.get(key), f'{where}.{key}')
        if found is not None:
            return found
    return None


@HOOKS.register_module()
class EmptyDetectionsHook(Hook):
    """Count the predicted instances of every evaluation split and log one line when there are none.

    Samples without ``pred_instances`` (classifiers, segmentors) are ignored. ``empty_splits`` lists the
    splits (``'val'`` / ``'test'``) of the last evaluations that had no prediction in any image;
    ``tools/test.py`` exits non-zero for them.
    """
    priority = 'LOW'

    def __init__(self) -> None:
        self.empty_splits: List[str] = []
        self._counts: Dict[str, List[int]] = {}

    def _count(self, split: str, outputs: Optional[Sequence[Any]]) -> None:
        for sample in outputs or ():
            instances = getattr(sample, 'pred_instances', None)
            if instances is not None:
                images, predictions = self._counts.setdefault(split, [0, 0])
                self._counts[split] = [images + 1, predictions + len(instances)]

    def _report(self, runner: Runner, split: str) -> None:
        images, predictions = self._counts.pop(split, [0, 0])
        if split in self.empty_splits:
            self.empty_splits.remove(split)
        if images == 0 or predictions > 0:
            return
        self.empty_splits.append(split)
        model_cfg = runner.cfg.get('model', {})
        threshold = find_score_threshold(model_cfg.get('test_cfg') if isinstance(model_cfg, dict) else None)
        where = f'above {threshold[0]}={threshold[1]}' if threshold else 'at all'
        print_log(f'{split}: the model predicted no object in any of the {images} images ({where}): it predicts '
                  'background everywhere, so there is no metric. Train longer or check the data and the lr.',
                  logger='current', level=40)  # logging.ERROR

    def after_val_iter(self, runner: Runner, batch_idx: int, data_batch: Any = None,
                       outputs: Optional[Sequence[Any]] = None) -> None:
        self._count('val', outputs)

    def after_test_iter(self, runner: Runner, batch_idx: int, data_batch: Any = None,
                        outputs: Optional[Sequence[Any]] = None) -> None:
        self._count('test', outputs)

    def after_val_epoch(self, runner: Runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._report(runner, 'val')

    def after_test_epoch(self, runner: Runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._report(runner, 'test')
