"""Shape-texture bias on cue-conflict images (Geirhos et al. 2019, "ImageNet-trained CNNs are biased towards
texture"; iLLaMA paper Sec. 4.3, Table 8 and App. H, Fig. 8), by the 16-class protocol of model-vs-human
(github.com/bethgelab/model-vs-human).

* Stimuli: the published layout ``cue-conflict/<shape category>/<shape><n>-<texture><m>.png`` (e.g.
  ``cat/cat7-elephant1.png``): the folder and the name's first word are the shape category, the second word the
  texture category (:func:`read_stimuli`). Nothing is downloaded.
* Categories: a mapping ``category -> class indices`` of the classifier. For a 1000-class ImageNet model it is
  :data:`IMAGENET16`, the 16 entry-level categories of Geirhos et al. with their ImageNet-1k classes (the WordNet
  hyponyms of each category found among the ILSVRC-2012 classes, as model-vs-human's ``helper/human_categories.py``
  lists them); for any other classifier each class can be its own category (:func:`class_categories`: the shapes
  classifiers on the shapes cue-conflict set of :mod:`mmcausal.datasets.shapes.cue_conflict`).
* Decision: the category with the highest *mean* softmax probability over its classes (model-vs-human's
  ``ImageNetProbabilitiesTo16ClassesMapping`` aggregates with ``np.mean``; classes in no category are ignored).
* Shape bias: over the images whose shape and texture categories differ, ``shape decisions / (shape decisions +
  texture decisions)``; decisions for a third category count in neither. Overall: pooled over all those images
  (model-vs-human's ``ShapeBias`` on the whole set, the dashed lines of its plot and of Fig. 8); per category: over
  the images of that *shape* category (the points of Fig. 8). The mean over the categories (model-vs-human's
  benchmark summary) is reported too; the paper does not say which of the two Table 8 gives.
"""
import os
import os.path as osp
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from torch import Tensor, nn

from mmcausal.registry import DATASETS
from .calibration import check_classifier, class_probabilities
from .errors import AnalysisError
from .inputs import image_loader_cfg
from .plotting import new_figure, save_figure

Categories = Mapping[str, Sequence[int]]  # category -> class indices of the classifier


def _classes(*spans: object, without: Iterable[int] = ()) -> Tuple[int, ...]:
    """Sorted class indices of ``spans`` (an int, or a ``(first, last)`` pair, inclusive) minus ``without``."""
    indices = set()
    for span in spans:
        first, last = span if isinstance(span, tuple) else (span, span)
        indices.update(range(first, last + 1))
    return tuple(sorted(indices - set(without)))


#: The 16 categories of Geirhos et al. (alphabetical, as model-vs-human sorts them) and their ImageNet-1k class
#: indices (0-based, in the order of the sorted WNIDs), e.g. airplane = airliner (404), knife = cleaver (499),
#: oven = rotisserie (766); dog = the 109 dog breeds among 152..268, cat = the domestic cats and the cougar.
IMAGENET16: Dict[str, Tuple[int, ...]] = {
    'airplane': _classes(404),
    'bear': _classes((294, 297)),
    'bicycle': _classes(444, 671),
    'bird': _classes(8, (10, 16), (18, 20), (22, 24), (80, 83), (87, 96), (98, 100), (127, 133), (135, 145)),
    'boat': _classes(472, 554, 625, 814, 914),
    'bottle': _classes(440, 720, 737, 898, 899, 901, 907),
    'car': _classes(436, 511, 817),
    'cat': _classes((281, 286)),
    'chair': _classes(423, 559, 765, 857),
    'clock': _classes(409, 530, 892),
    'dog': _classes((152, 268), without=(192, 204, 227, 242, 251, 258, 260, 264)),
    'elephant': _classes(385, 386),
    'keyboard': _classes(508, 878),
    'knife': _classes(499),
    'oven': _classes(766),
    'truck': _classes(555, 569, 656, 675, 717, 734, 864, 867),
}
IMAGENET_CLASSES = 1000


def class_categories(class_names: Sequence[str]) -> Dict[str, Tuple[int, ...]]:
    """Every class its own category: ``{name: (index,)}``."""
    if len(set(class_names)) != len(class_names):
        raise AnalysisError(f'The class names {list(class_names)} repeat a name; each class must be one category.')
    return {name: (index, ) for index, name in enumerate(class_names)}


def check_categories(categories: Categories, num_classes: int) -> None:
    """Every class index of ``categories`` must be a class of a ``num_classes``-way classifier."""
    highest = max(max(indices) for indices in categories.values())
    if highest >= num_classes:
        raise AnalysisError(f'The categories name class {highest}, but the classifier has {num_classes} classes; '
                            'use the ImageNet-16 categories with a 1000-class ImageNet model, else --categories '
                            'classes.')


CATEGORY_KINDS = ('auto', 'imagenet16', 'classes')


def config_class_names(cfg: Config) -> Optional[Tuple[str, ...]]:
    """The class names of the config's val (or test) dataset: its ``metainfo.classes``, else those its dataset
    type declares (``METAINFO``); None without either."""
    for key in ('val_dataloader', 'test_dataloader'):
        dataset = (cfg.get(key) or {}).get('dataset') or {}
        classes = (dataset.get('metainfo') or {}).get('classes')
        if classes:
            return tuple(classes)
        init_default_scope(cfg.get('default_scope', 'mmpretrain'))
        dataset_cls = DATASETS.get(dataset.get('type')) if isinstance(dataset.get('type'), str) else None
        classes = getattr(dataset_cls, 'METAINFO', {}).get('classes')
        if classes:
            return tuple(classes)
    return None


def categories_for(kind: str, cfg: Config, num_classes: Optional[int]) -> Dict[str, Tuple[int, ...]]:
    """The category mapping ``kind`` names for a ``num_classes``-way classifier of ``cfg``: ``'imagenet16'``
    (:data:`IMAGENET16`), ``'classes'`` (each class of the config's dataset its own category) or ``'auto'`` (the
    first for 1000 classes, else the second), checked against ``num_classes`` (None: unknown)."""
    if kind not in CATEGORY_KINDS:
        raise AnalysisError(f'Unknown category mapping {kind!r}; choose one of {CATEGORY_KINDS}.')
    if kind == 'imagenet16' or (kind == 'auto' and num_classes == IMAGENET_CLASSES):
        if num_classes is not None:
            check_categories(IMAGENET16, num_classes)
        return dict(IMAGENET16)
    names = config_class_names(cfg)
    if names is None:
        raise AnalysisError('The config names no classes (val dataset metainfo.classes); set them, or use '
                            '--categories imagenet16 with a 1000-class ImageNet model.')
    if num_classes is not None and len(names) != num_classes:
        raise AnalysisError(f'The config names {len(names)} classes but the classifier has {num_classes}; set '
                            'the val dataset\'s metainfo.classes to its classes.')
    return class_categories(names)


def num_classes_of(model: nn.Module) -> Optional[int]:
    """The classifier head's ``num_classes`` (None if it has none)."""
    return getattr(getattr(model, 'head', None), 'num_classes', None)


# --- stimuli -------------------------------------------------------------------------------------------------------
STIMULUS_NAME = re.compile(r'(?P<shape>[^\W\d]+)(?P<n>\d+)-(?P<texture>[^\W\d]+)(?P<m>\d+)'
                           r'\.(?:png|jpe?g|bmp|ppm|pgm|tif)', re.IGNORECASE)
IMAGE_SUFFIXES = ('.png', '.jpg', '.jpeg', '.bmp', '.ppm', '.pgm', '.tif')


@dataclass(frozen=True)
class Stimulus:
    """One cue-conflict image: its path relative to the set's folder, shape and texture categories."""
    path: str
    shape: str
    texture: str

    @property
    def conflicting(self) -> bool:
        return self.shape != self.texture


def parse_stimulus_name(name: str) -> Tuple[str, str]:
    """``'cat7-elephant1.png'`` -> ``('cat', 'elephant')``."""
    match = STIMULUS_NAME.fullmatch(name)
    if match is None:
        raise AnalysisError(f'{name} is not named <shape><n>-<texture><m>.png (e.g. cat7-elephant1.png), the '
                            'naming of the cue-conflict set; rename or remove it.')
    return match['shape'], match['texture']


def read_stimuli(folder: str) -> List[Stimulus]:
    """The cue-conflict images of ``folder`` (``<shape>/<shape><n>-<texture><m>.png``), sorted by path; any other
    image, or a name whose shape is not its folder, is an error. Files that are not images are skipped."""
    if not osp.isdir(folder):
        raise AnalysisError(f'Cue-conflict folder not found: {folder}')
    stimuli = []
    for directory, _, files in os.walk(folder):
        for name in files:
            if not name.lower().endswith(IMAGE_SUFFIXES):
                continue
            path = osp.relpath(osp.join(directory, name), folder)
            parts = path.split(os.sep)
            if len(parts) != 2:
                raise AnalysisError(f'{path} is not in the layout <shape category>/<shape><n>-<texture><m>.png; give '
                                    'the cue-conflict folder itself (its category folders inside).')
            shape, texture = parse_stimulus_name(name)
            if shape != parts[0]:
                raise AnalysisError(f'{path}: its shape {shape!r} is not its folder {parts[0]!r}; the folder is the '
                                    'shape category.')
            stimuli.append(Stimulus('/'.join(parts), shape, texture))
    if not stimuli:
        raise AnalysisError(f'{folder} holds no cue-conflict images (<shape>/<shape><n>-<texture><m>.png).')
    return sorted(stimuli, key=lambda stimulus: stimulus.path)


def check_stimulus_categories(stimuli: Sequence[Stimulus], categories: Categories) -> None:
    """The stimuli's shape and texture categories must all be categories of the mapping."""
    unknown = sorted({c for s in stimuli for c in (s.shape, s.texture)} - set(categories))
    if unknown:
        raise AnalysisError(f'The cue-conflict images name categories {unknown} that are not among the model\'s '
                            f'{sorted(categories)}; give the mapping of that set (--categories).')


# --- decisions -----------------------------------------------------------------------------------------------------
def category_probabilities(probabilities: Tensor, categories: Categories) -> Tensor:
    """``(n, C)`` mean probability of each category's classes, for ``(n, K)`` class probabilities (categories in
    the mapping's order)."""
    return torch.stack([probabilities[:, list(indices)].mean(-1) for indices in categories.values()], -1)


def decide(probabilities: Tensor, categories: Categories) -> List[str]:
    """The decision of each image: the category of the highest mean probability (the first on a tie)."""
    names = list(categories)
    return [names[i] for i in category_probabilities(probabilities, categories).argmax(-1).tolist()]


@dataclass
class BiasCounts:
    """Decisions over cue-conflict images (shape != texture): images, shape and texture decisions."""
    images: int = 0
    shape: int = 0
    texture: int = 0

    @property
    def other(self) -> int:
        return self.images - self.shape - self.texture

    @property
    def bias(self) -> float:
        """``shape / (shape + texture)``; NaN without a shape or texture decision."""
        cued = self.shape + self.texture
        return self.shape / cued if cued else float('nan')

    def add(self, decision: str, stimulus: Stimulus) -> None:
        self.images += 1
        self.shape += decision == stimulus.shape
        self.texture += decision == stimulus.texture


@dataclass
class ShapeBias:
    """The result on a set: pooled counts, counts per shape category (in the mapping's order, only categories with
    images), the images without conflict left out, and every image's decision."""
    overall: BiasCounts
    per_category: Dict[str, BiasCounts]
    excluded: int
    decisions: List[Tuple[Stimulus, str]] = field(default_factory=list)

    @property
    def category_mean(self) -> float:
        """Mean of the per-category shape biases (categories without a shape or texture decision left out)."""
        values = [c.bias for c in self.per_category.values() if not np.isnan(c.bias)]
        return float(np.mean(values)) if values else float('nan')


def shape_bias(stimuli: Sequence[Stimulus], decisions: Sequence[str], categories: Iterable[str]) -> ShapeBias:
    """:class:`ShapeBias` of one decision per stimulus; images of one category for shape and texture are left
    out."""
    if len(stimuli) != len(decisions):
        raise AnalysisError(f'{len(decisions)} decisions for {len(stimuli)} images.')
    overall, per_category = BiasCounts(), {name: BiasCounts() for name in categories}
    for stimulus, decision in zip(stimuli, decisions):
        if stimulus.conflicting:
            overall.add(decision, stimulus)
            per_category.setdefault(stimulus.shape, BiasCounts()).add(decision, stimulus)
    if overall.images == 0:
        raise AnalysisError('No cue-conflict image has a texture category other than its shape category.')
    return ShapeBias(overall, {name: counts for name, counts in per_category.items() if counts.images},
                     len(stimuli) - overall.images, list(zip(stimuli, decisions)))


# --- the model on the stimuli --------------------------------------------------------------------------------------
def stimulus_batches(model: nn.Module, cfg: Config, folder: str) -> Iterator[Tuple[Tensor, List[str]]]:
    """``(inputs, paths)`` of every image of ``folder`` (paths relative to it, ``/``-separated) through the
    config's test pipeline and the model's data preprocessor."""
    loader = image_loader_cfg(cfg, folder)
    for batch in Runner.build_dataloader(loader, seed=0):
        data = model.data_preprocessor(batch, False)
        paths = [osp.relpath(sample.img_path, folder).replace(os.sep, '/') for sample in data['data_samples']]
        yield data['inputs'], paths


def evaluate_shape_bias(model: nn.Module, batches: Iterable[Tuple[Tensor, List[str]]],
                        stimuli: Sequence[Stimulus], categories: Optional[Categories] = None) -> ShapeBias:
    """:class:`ShapeBias` of a classifier on ``stimuli`` read as ``(inputs, paths)`` batches; ``categories``
    default: :data:`IMAGENET16`."""
    model = check_classifier(model)
    categories = IMAGENET16 if categories is None else categories
    check_stimulus_categories(stimuli, categories)
    by_path = {stimulus.path: stimulus for stimulus in stimuli}
    seen, decided = [], []
    for inputs, paths in batches:
        probabilities = class_probabilities(model, inputs).cpu()
        check_categories(categories, probabilities.shape[-1])
        seen += [by_path[path] for path in paths if path in by_path]
        decided += [d for d, path in zip(decide(probabilities, categories), paths) if path in by_path]
    missing = len(stimuli) - len(seen)
    if missing:
        raise AnalysisError(f'{missing} of the {len(stimuli)} cue-conflict images were not read by the pipeline.')
    return shape_bias(seen, decided, categories)


# --- output --------------------------------------------------------------------------------------------------------
SUMMARY_HEADER = ('model', 'category', 'images', 'shape_decisions', 'texture_decisions', 'other_decisions',
                  'shape_bias')
DECISIONS_HEADER = ('model', 'image', 'shape', 'texture', 'decision', 'kind')
POOLED, MEAN = 'all (pooled)', 'mean over categories'


def summary_rows(results: Dict[str, ShapeBias]) -> List[list]:
    """CSV rows of :data:`SUMMARY_HEADER`: per model, every shape category, the pooled result and the category
    mean (NaN written as an empty field)."""
    rows = []
    for label, result in results.items():
        for name, counts in [*result.per_category.items(), (POOLED, result.overall)]:
            rows.append([label, name, counts.images, counts.shape, counts.texture, counts.other,
                         '' if np.isnan(counts.bias) else counts.bias])
        mean = result.category_mean
        rows.append([label, MEAN, '', '', '', '', '' if np.isnan(mean) else mean])
    return rows


def decision_rows(results: Dict[str, ShapeBias]) -> List[list]:
    """CSV rows of :data:`DECISIONS_HEADER`: every image of every model; kind ``shape``, ``texture``, ``other`` or
    ``no conflict`` (shape = texture, left out)."""
    rows = []
    for label, result in results.items():
        for stimulus, decision in result.decisions:
            kind = ('no conflict' if not stimulus.conflicting else 'shape' if decision == stimulus.shape else
                    'texture' if decision == stimulus.texture else 'other')
            rows.append([label, stimulus.path, stimulus.shape, stimulus.texture, decision, kind])
    return rows


MARKERS = ('o', 's', 'D', '^', 'v', 'P', 'X', '*')


def shape_bias_figure(results: Dict[str, ShapeBias]) -> Figure:
    """Fig. 8: per shape category (rows), each model's fraction of shape decisions (1 on the left, as
    model-vs-human draws it; the top axis reads the fraction of texture decisions), the dashed line of each model
    its pooled shape bias."""
    names = list(dict.fromkeys(name for result in results.values() for name in result.per_category))
    figure, axes = new_figure(1, 1, (4.6, .3 * len(names) + 1.6 + .16 * len(results)))
    ax = axes[0, 0]
    rows = {name: len(names) - 1 - i for i, name in enumerate(names)}  # the first category on top
    for number, (label, result) in enumerate(results.items()):
        points = [(c.bias, rows[name]) for name, c in result.per_category.items() if not np.isnan(c.bias)]
        overall = result.overall.bias
        ax.scatter([x for x, _ in points], [y for _, y in points], marker=MARKERS[number % len(MARKERS)], s=28,
                   edgecolors='black', linewidths=.5, zorder=3,
                   label=f'{label}: {"n/a" if np.isnan(overall) else f"{overall:.3f}"}')
        if not np.isnan(overall):
            ax.axvline(overall, color=ax.collections[-1].get_facecolor()[0], linestyle='--', linewidth=1)
    ax.set_yticks(list(rows.values()), list(rows))
    ax.set(xlim=(1.03, -.03), ylim=(-.6, len(names) - .4), xlabel="fraction of 'shape' decisions")
    ax.grid(axis='x', color='lightgrey', linewidth=.5)
    top = ax.secondary_xaxis('top', functions=(lambda x: 1 - x, lambda x: 1 - x))
    top.set_xlabel("fraction of 'texture' decisions", fontsize=7)
    top.tick_params(labelsize=6)
    ax.tick_params(labelsize=7)
    ax.xaxis.label.set_fontsize(7)
    below = offset_copy(ax.transAxes, figure, y=-.45, units='inches')  # under the x label, whatever the height
    ax.legend(fontsize=6, loc='upper center', bbox_to_anchor=(.5, 0), bbox_transform=below, frameon=False,
              title='shape bias (pooled: dashed line)', title_fontsize=6)
    return figure


def plot_shape_bias(results: Dict[str, ShapeBias], path: str) -> str:
    """Write :func:`shape_bias_figure` as a PNG; returns ``path``."""
    return save_figure(shape_bias_figure(results), path)
