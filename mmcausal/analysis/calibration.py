"""Calibration of a classifier: expected calibration error and reliability diagram (iLLaMA paper Sec. 4.3, Table 8
and App. G, Fig. 7; the measure of Guo et al. 2017, "On calibration of modern neural networks").

For ``n`` labelled images with logits ``z_i`` and labels ``y_i``:

* the confidence of image ``i`` is its largest softmax probability ``c_i = max_k softmax(z_i)_k``, its prediction
  ``argmax_k z_i`` and its hit ``h_i = 1`` if the prediction is ``y_i`` (top-1), else 0;
* ``M`` equal-width bins split the confidences, ``B_b = {i : (b - 1) / M < c_i <= b / M}`` for ``b = 1 .. M``
  (``M = 15`` as Guo et al. and the paper);
* ``acc(B_b)`` is the mean hit and ``conf(B_b)`` the mean confidence of the bin;
* ``ECE = sum_b |B_b| / n * |acc(B_b) - conf(B_b)|`` (empty bins add nothing): 0 for a perfectly calibrated model,
  at most 1.

The reliability diagram draws ``acc(B_b)`` per bin, with the gap to ``conf(B_b)``, against the diagonal of perfect
calibration; bins below the diagonal are over-confident, above it under-confident. Every sum is taken in fp64.

The classifier helpers (:func:`check_classifier`, :func:`class_probabilities`) also serve the shape-bias analysis.
"""
import os
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import torch
from matplotlib.figure import Figure
from mmengine.config import Config
from mmengine.runner import Runner
from mmpretrain.models.classifiers import BaseClassifier, ImageClassifier
from torch import Tensor, nn

from .errors import AnalysisError
from .inputs import image_loader_cfg
from .plotting import new_figure, save_figure
from .resolution_eval import unwrap

#: equal-width confidence bins of the ECE and the reliability diagram (Guo et al. 2017, the paper's Table 8)
NUM_BINS = 15


def check_classifier(model: nn.Module) -> nn.Module:
    """``model`` (unwrapped) if it is an mmpretrain classifier whose ``mode='tensor'`` output is class logits, else
    a clear error."""
    model = unwrap(model)
    if not isinstance(model, BaseClassifier):
        raise AnalysisError(f'{type(model).__name__} is not an image classifier; this analysis needs class scores: '
                            'give a classification config (an mmpretrain ImageClassifier with a head).')
    if isinstance(model, ImageClassifier) and not model.with_head:
        raise AnalysisError('The classifier has no head, so no class scores; give a config whose model.head is a '
                            'classification head.')
    return model


@torch.no_grad()
def class_probabilities(model: nn.Module, inputs: Tensor) -> Tensor:
    """``(B, K)`` softmax probabilities (fp64) of ``model``'s logits (``mode='tensor'``) for ``(B, C, H, W)``
    network inputs."""
    logits = model(inputs, mode='tensor')
    if not isinstance(logits, Tensor) or logits.dim() != 2 or len(logits) != len(inputs):
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise AnalysisError(f'The classifier gives {shape} instead of (batch, classes) logits; use a head whose '
                            'forward returns the class scores (e.g. LinearClsHead).')
    return logits.double().softmax(-1)


def labelled_batches(model: nn.Module, cfg: Config, num_images: Optional[int] = None,
                     image_dir: Optional[str] = None) -> Iterator[Tuple[Tensor, Tensor]]:
    """``(inputs, labels)`` batches of the config's val (or test) dataloader, or of ``image_dir``'s class subfolders
    (labels in sorted folder-name order, as ImageNet's WNIDs and the shapes classes are numbered), after the model's
    data preprocessor; the first ``num_images`` (None: all)."""
    loader = image_loader_cfg(cfg, image_dir)
    if image_dir is not None:
        with os.scandir(image_dir) as entries:
            has_subfolders = any(entry.is_dir() for entry in entries)
        if not has_subfolders:
            raise AnalysisError(f'{image_dir} has no class subfolders; calibration needs labelled images: a folder '
                                'of one subfolder per class (sorted names = class indices), or no --images.')
        loader['dataset']['with_label'] = True
    seen = 0
    for batch in Runner.build_dataloader(loader, seed=0):
        data = model.data_preprocessor(batch, False)
        samples = data['data_samples'] or []
        if not samples or not all('gt_label' in sample for sample in samples):
            raise AnalysisError('The images have no labels (gt_label); give a labelled val dataloader or a folder '
                                'of class subfolders.')
        labels = torch.cat([sample.gt_label.reshape(-1)[:1] for sample in samples]).long()
        take = len(labels) if num_images is None else min(len(labels), num_images - seen)
        seen += take
        yield data['inputs'][:take], labels[:take].cpu()
        if num_images is not None and seen >= num_images:
            return


def confidences_and_hits(probabilities: Tensor, labels: Tensor) -> Tuple[Tensor, Tensor]:
    """``(n,)`` confidences (largest probability) and top-1 hits (1.0 / 0.0) of ``(n, K)`` probabilities."""
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < probabilities.shape[-1]:
        raise AnalysisError(f'Labels {int(labels.min())}..{int(labels.max())} do not fit the classifier\'s '
                            f'{probabilities.shape[-1]} classes; evaluate it on its own classes.')
    confidence, predicted = probabilities.double().max(-1)
    return confidence, (predicted == labels.to(predicted.device)).double()


def bin_indices(confidence: Tensor, num_bins: int = NUM_BINS) -> Tensor:
    """0-based bin of each confidence: ``b`` for ``b / M < c <= (b + 1) / M`` (a confidence of 0 goes to bin 0)."""
    edges = torch.linspace(0, 1, num_bins + 1, dtype=torch.float64)
    return torch.bucketize(confidence.double(), edges[1:-1], right=False)


@dataclass
class Calibration:
    """Per-bin counts, accuracies and mean confidences (``(M,)`` each, 0 for empty bins), bin edges ``(M + 1,)``
    and the totals of ``n`` images."""
    counts: Tensor
    accuracy: Tensor
    confidence: Tensor
    edges: Tensor
    n: int
    top1: float
    mean_confidence: float

    @property
    def ece(self) -> float:
        """``sum_b |B_b| / n * |acc(B_b) - conf(B_b)|``."""
        return float((self.counts / self.n * (self.accuracy - self.confidence).abs()).sum())

    @property
    def num_bins(self) -> int:
        return len(self.counts)


def calibration(confidence: Tensor, hits: Tensor, num_bins: int = NUM_BINS) -> Calibration:
    """:class:`Calibration` of ``(n,)`` confidences in [0, 1] and top-1 hits (1 / 0)."""
    if num_bins < 1:
        raise AnalysisError(f'The number of bins must be positive, got {num_bins}.')
    confidence, hits = confidence.double().flatten().cpu(), hits.double().flatten().cpu()
    if len(confidence) == 0:
        raise AnalysisError('No images to calibrate on; check the dataloader or --images folder.')
    bins = bin_indices(confidence, num_bins)
    counts = torch.bincount(bins, minlength=num_bins).double()
    nonempty = counts.clamp(min=1)
    accuracy = torch.bincount(bins, hits, minlength=num_bins) / nonempty
    mean_confidence = torch.bincount(bins, confidence, minlength=num_bins) / nonempty
    return Calibration(counts, accuracy, mean_confidence, torch.linspace(0, 1, num_bins + 1, dtype=torch.float64),
                       len(confidence), float(hits.mean()), float(confidence.mean()))


def expected_calibration_error(probabilities: Tensor, labels: Tensor, num_bins: int = NUM_BINS) -> float:
    """ECE of ``(n, K)`` class probabilities against ``(n,)`` labels."""
    return calibration(*confidences_and_hits(probabilities, labels), num_bins).ece


def evaluate_calibration(model: nn.Module, batches: Iterable[Tuple[Tensor, Tensor]],
                         num_bins: int = NUM_BINS) -> Calibration:
    """:class:`Calibration` of a classifier over ``(inputs, labels)`` batches."""
    model = check_classifier(model)
    confidences, hits = [], []
    for inputs, labels in batches:
        confidence, hit = confidences_and_hits(class_probabilities(model, inputs).cpu(), labels)
        confidences.append(confidence)
        hits.append(hit)
    if not confidences:
        raise AnalysisError('No images to calibrate on; check the dataloader or --images folder.')
    return calibration(torch.cat(confidences), torch.cat(hits), num_bins)


SUMMARY_HEADER = ('model', 'images', 'top1', 'mean_confidence', 'ece', 'bins')
BINS_HEADER = ('model', 'bin', 'lower', 'upper', 'images', 'accuracy', 'confidence', 'gap')


def summary_rows(results: Dict[str, Calibration]) -> List[list]:
    """CSV rows of :data:`SUMMARY_HEADER`, one per model."""
    return [[label, c.n, c.top1, c.mean_confidence, c.ece, c.num_bins] for label, c in results.items()]


def bin_rows(results: Dict[str, Calibration]) -> List[list]:
    """CSV rows of :data:`BINS_HEADER`: every bin of every model (empty bins: accuracy, confidence and gap empty);
    the gap is ``acc - conf`` (negative: over-confident)."""
    rows = []
    for label, c in results.items():
        for b in range(c.num_bins):
            filled = c.counts[b] > 0
            values = [float(c.accuracy[b]), float(c.confidence[b]), float(c.accuracy[b] - c.confidence[b])]
            rows.append([label, b + 1, float(c.edges[b]), float(c.edges[b + 1]), int(c.counts[b]),
                         *(values if filled else ['', '', ''])])
    return rows


def reliability_figure(results: Dict[str, Calibration]) -> Figure:
    """Fig. 7: per model, a reliability diagram (top: accuracy per confidence bin, the gap to the bin's mean
    confidence hatched, the diagonal of perfect calibration) over the share of images in each bin (bottom)."""
    figure, axes = new_figure(2, len(results), (3.4, 1.9))
    axes[0, 0].get_gridspec().set_height_ratios([3, 1])
    for column, (label, c) in enumerate(results.items()):
        top, bottom = axes[0, column], axes[1, column]
        lower, width = c.edges[:-1].numpy(), 1. / c.num_bins
        filled = (c.counts > 0).numpy()
        accuracy, confidence = c.accuracy.numpy()[filled], c.confidence.numpy()[filled]
        top.bar(lower[filled], accuracy, width, align='edge', color='tab:blue', edgecolor='black', linewidth=.5,
                label='accuracy')
        top.bar(lower[filled], confidence - accuracy, width, bottom=accuracy, align='edge', color='tab:red',
                alpha=.3, edgecolor='tab:red', hatch='//', linewidth=.5, label='gap to mean confidence')
        top.plot([0, 1], [0, 1], color='grey', linestyle='--', linewidth=1, label='perfect calibration')
        top.set(xlim=(0, 1), ylim=(0, 1), ylabel='accuracy', title=f'{label}\nECE {c.ece:.4f}, top-1 '
                f'{100 * c.top1:.1f} %, {c.n} images')
        top.title.set_fontsize(8)
        top.legend(fontsize=6, loc='upper left')
        bottom.bar(lower, (c.counts / c.n).numpy(), width, align='edge', color='grey', edgecolor='black',
                   linewidth=.5)
        bottom.set(xlim=(0, 1), xlabel=f'confidence (max softmax), {c.num_bins} bins', ylabel='share of images')
        for ax in (top, bottom):
            ax.tick_params(labelsize=6)
            ax.xaxis.label.set_fontsize(7)
            ax.yaxis.label.set_fontsize(7)
    return figure


def plot_reliability(results: Dict[str, Calibration], path: str) -> str:
    """Write :func:`reliability_figure` as a PNG; returns ``path``."""
    return save_figure(reliability_figure(results), path)

