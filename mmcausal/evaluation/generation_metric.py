"""``GenerationMetric``: the generation metrics in an mmengine val / test loop of a class-conditional generator.

The model's ``predict()`` returns data samples with the generated image in ``pred_img`` (uint8 ``(3, H, W)``, RGB)
and the conditioning label in ``gt_label`` (mmpretrain ``DataSample``); the metric collects them over all ranks and
computes :func:`~mmcausal.evaluation.evaluate_generation` against a reference ``.npz`` (ADM layout) at the end.
"""
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
from mmengine.evaluator import BaseMetric

from mmcausal.registry import METRICS
from .fidelity import ADM_IS_SPLITS
from .generation_report import evaluate_generation, load_reference
from .sample_files import load_sample_npz


@METRICS.register_module()
class GenerationMetric(BaseMetric):
    """FD, sFID, IS, KID, k-NN precision / recall (torch-fidelity), the extractor's accuracy on the labels and the
    memorisation check.

    Args:
        extractor: ``'judge:CKPT'``, ``'inception:WEIGHTS'`` or ``'inception'`` (see
            :func:`~mmcausal.evaluation.build_extractor`); built when the metrics are computed, so the checkpoint may
            be written during the run.
        reference: ADM ``.npz`` of real images of the samples' size (``tools/generation/make_reference_npz.py``, or
            ADM's reference batch).
        holdout: optional ADM ``.npz`` of held-out real images for the memorisation reference.
        k: neighbours of the precision / recall manifolds. splits: Inception Score splits (ADM: 10).
        batch_size: images per extractor forward. device: the extractor's device.
        image_key: the data-sample field holding the uint8 ``(3, H, W)`` image.
        memorisation_space: ``'pixels'``, ``'features'`` or ``'none'`` (see
            :func:`~mmcausal.evaluation.evaluate_generation`).
        ref_stats: ``'auto'``, ``'npz'`` or ``'images'``: where the reference's FID statistics come from (see
            :func:`~mmcausal.evaluation.load_reference`).
    """
    default_prefix: Optional[str] = 'gen'

    def __init__(self, extractor: str, reference: str, holdout: Optional[str] = None, k: int = 3,
                 splits: int = ADM_IS_SPLITS, batch_size: int = 100, device: str = 'cpu', image_key: str = 'pred_img',
                 memorisation_space: str = 'pixels', ref_stats: str = 'auto', collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.extractor, self.reference, self.ref_stats, self.holdout = extractor, reference, ref_stats, holdout
        self.k, self.splits, self.batch_size, self.device, self.image_key = k, splits, batch_size, device, image_key
        self.memorisation_space = memorisation_space

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            image = torch.as_tensor(sample[self.image_key])
            if image.dtype != torch.uint8 or image.ndim != 3 or image.shape[0] != 3:
                raise ValueError(f'{self.image_key} must be a uint8 (3, H, W) image, got {image.dtype} '
                                 f'{tuple(image.shape)}')
            label = sample.get('gt_label')
            self.results.append((image.permute(1, 2, 0).cpu().numpy(),
                                 None if label is None else int(torch.as_tensor(label).reshape(-1)[0])))

    def compute_metrics(self, results: List[tuple]) -> Dict[str, float]:
        images = np.stack([image for image, _ in results])
        labels = [label for _, label in results]
        from .extractors import build_extractor
        reference, stats = load_reference(self.reference, self.ref_stats, self.extractor.startswith('inception'))
        holdout = None if self.holdout is None else load_sample_npz(self.holdout)[0]
        return evaluate_generation(images, reference, build_extractor(self.extractor, self.device),
                                   labels=None if None in labels else np.asarray(labels), holdout=holdout, k=self.k,
                                   splits=self.splits, batch_size=self.batch_size,
                                   memorisation_space=self.memorisation_space, reference_stats=stats)
