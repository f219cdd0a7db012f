"""What the analysis tools read: models named ``CONFIG[:CHECKPOINT]`` and batches of preprocessed images.

A model is built from its config as the Runner builds it (``cfg.model`` with the config's top-level
``data_preprocessor``, in the config's default scope) and loads its checkpoint strictly through mmengine, i.e.
through mmcausal's safe loader; without a checkpoint it keeps its random init (seed 0). Images come from a folder,
through the config's test pipeline, or from the config's val dataloader, in dataset order, and leave through the
model's data preprocessor: ``(B, C, H, W)`` network inputs.
"""
import argparse
import copy
import inspect
import os
import os.path as osp
from dataclasses import dataclass, replace
from typing import Iterator, List, Optional, Sequence, Tuple

import torch
from mmengine.config import Config, DictAction
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmengine.runner.checkpoint import load_checkpoint
from torch import Tensor, nn

from mmcausal.models.layers import MASK_MODES
from mmcausal.registry import MODELS
from mmcausal.utils.cli import check_checkpoint_argument
from mmcausal.utils.config_check import check_pretrained_paths
from mmcausal.utils.config_reading import read_config
from mmcausal.utils.dataset_check import check_dataset_paths
from mmcausal.utils.error_report import DEBUG_ENV
from .errors import AnalysisError

CHECKPOINT_SEPARATOR = '.py:'
LOGGER = 'mmcausal-analysis'


@dataclass(frozen=True)
class ModelEntry:
    """One model of a comparison: its config, checkpoint (None = random init), ``mask_mode`` override and label."""
    config: str
    checkpoint: Optional[str] = None
    mask_mode: Optional[str] = None
    label: str = ''


def split_model_spec(spec: str) -> Tuple[str, Optional[str]]:
    """``'a.py:b.pth'`` -> ``('a.py', 'b.pth')``, ``'a.py'`` -> ``('a.py', None)``; the split is at the first
    ``.py:``, so a checkpoint URL keeps its ``://``."""
    index = spec.find(CHECKPOINT_SEPARATOR)
    if index < 0:
        return spec, None
    return spec[:index + 3], spec[index + len(CHECKPOINT_SEPARATOR):] or None


def model_entries(specs: Sequence[str], mask_modes: Optional[Sequence[str]] = None,
                  labels: Optional[Sequence[str]] = None) -> List[ModelEntry]:
    """One entry per ``CONFIG[:CHECKPOINT]`` spec and mask mode (specs first); default labels are the config names
    (plus the mode), ``labels`` replace them in that order."""
    entries = []
    for spec in specs:
        config, checkpoint = split_model_spec(spec)
        name = osp.splitext(osp.basename(config))[0]
        for mode in mask_modes or [None]:
            entries.append(ModelEntry(config, checkpoint, mode, name if mode is None else f'{name} ({mode})'))
    if labels:
        if len(labels) != len(entries):
            raise AnalysisError(f'--labels names {len(labels)} models, but there are {len(entries)} (every '
                                'CONFIG[:CHECKPOINT] times every --mask-modes entry); give one label each.')
        entries = [replace(entry, label=label) for entry, label in zip(entries, labels)]
    repeated = sorted({entry.label for entry in entries if [e.label for e in entries].count(entry.label) > 1})
    if repeated:
        raise AnalysisError(f'Two models have the label {repeated[0]!r}; name them apart with --labels.')
    return entries


def positive_int(text: str) -> int:
    """A command-line value that must be a positive integer."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f'must be a positive integer, got {text}')
    return value


def add_model_arguments(parser: argparse.ArgumentParser, out_dir: str) -> None:
    """The arguments every analysis tool shares: models, mask modes, labels, images, output folder, config options."""
    parser.add_argument('models', nargs='+', metavar='CONFIG[:CHECKPOINT]',
                        help='configs to analyse, each with an optional checkpoint (none: random init, seed 0)')
    parser.add_argument('--mask-modes', nargs='+', choices=MASK_MODES,
                        help='analyse every model under each attention mask mode (sets model.backbone.mask_mode; '
                        'iLLaMA); the checkpoint is loaded into each')
    parser.add_argument('--labels', nargs='+', help='legend names, one per model (after --mask-modes expansion)')
    parser.add_argument('--images', metavar='DIR',
                        help='a folder of images, read through each config\'s test pipeline (default: the '
                        'config\'s val dataloader)')
    parser.add_argument('--out-dir', default=out_dir, help=f'where the PNG and CSV files go (default: {out_dir})')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override settings of every config, key=value pairs')
    parser.add_argument('--debug', action='store_true',
                        help='show the full traceback of input errors (default: one line saying what to change)')


def check_model_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> List[ModelEntry]:
    """The :class:`ModelEntry` s of ``args``; missing files and mismatched ``--labels`` are command-line errors."""
    if args.debug:
        os.environ[DEBUG_ENV] = '1'
    if not MMLogger.check_instance_created(LOGGER):
        MMLogger.get_instance(LOGGER, log_level='WARNING')  # the current logger from now on: no init chatter
    try:
        entries = model_entries(args.models, args.mask_modes, args.labels)
    except AnalysisError as error:
        parser.error(str(error))
    for entry in entries:
        if not osp.isfile(entry.config):
            parser.error(f'config file not found: {entry.config}')
        if entry.checkpoint is not None:
            check_checkpoint_argument(parser, entry.checkpoint)
    if args.images is not None and not osp.isdir(args.images):
        parser.error(f'image folder not found: {args.images}')
    return entries


def entry_config(entry: ModelEntry, cfg_options: Optional[dict] = None) -> Config:
    """The entry's config with ``cfg_options`` merged and its ``mask_mode`` (if any) set on the backbone."""
    cfg = read_config(entry.config, cfg_options)
    if entry.mask_mode is not None:
        backbone = cfg.model.get('backbone', {})
        init_default_scope(cfg.get('default_scope', 'mmpretrain'))
        backbone_cls = MODELS.get(backbone.get('type'))
        if backbone_cls is None or 'mask_mode' not in inspect.signature(backbone_cls).parameters:
            raise AnalysisError(f'--mask-modes sets model.backbone.mask_mode, which the backbone of {entry.config} '
                                f'({backbone.get("type")}) does not take; use it with an mmcausal backbone.')
        cfg.merge_from_dict({'model.backbone.mask_mode': entry.mask_mode})
    return cfg


def build_model(cfg: Config, checkpoint: Optional[str] = None) -> nn.Module:
    """``cfg.model`` in eval mode, with the checkpoint's weights (strict) or a random init (seed 0)."""
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    model_cfg = copy.deepcopy(cfg.model)
    if cfg.get('data_preprocessor') is not None:
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    if checkpoint is None:
        check_pretrained_paths(cfg)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    if checkpoint is None:
        model.init_weights()
    else:
        try:
            load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
        except RuntimeError as error:
            if 'state_dict' not in str(error):
                raise
            raise AnalysisError(f'{checkpoint} does not fit the model of the config: {error}') from error
    return model.eval()


def image_loader_cfg(cfg: Config, image_dir: Optional[str] = None) -> dict:
    """A single-process, unshuffled copy of the config's val (or test) dataloader; with ``image_dir`` its dataset
    becomes the images of that folder (any depth) through the same pipeline."""
    name = next((key for key in ('val_dataloader', 'test_dataloader') if cfg.get(key)), None)
    if name is None:
        raise AnalysisError('The config has no val_dataloader or test_dataloader to read images (and their test '
                            'pipeline) from.')
    loader = copy.deepcopy(cfg[name].to_dict() if hasattr(cfg[name], 'to_dict') else dict(cfg[name]))
    loader.update(num_workers=0, persistent_workers=False, sampler=dict(type='DefaultSampler', shuffle=False))
    if image_dir is None:
        check_dataset_paths(cfg, (name, ))
        return loader
    pipeline = loader['dataset'].get('pipeline')
    if pipeline is None:
        raise AnalysisError(f'The {name} dataset has no pipeline of its own (a dataset wrapper); read its images '
                            'without --images.')
    loader['dataset'] = dict(type='CustomDataset', data_prefix=image_dir, with_label=False, pipeline=pipeline)
    return loader


def image_batches(model: nn.Module, cfg: Config, num_images: int, image_dir: Optional[str] = None) -> Iterator[Tensor]:
    """The first ``num_images`` images as ``(B, C, H, W)`` inputs of ``model`` (after its data preprocessor)."""
    seen = 0
    for batch in Runner.build_dataloader(image_loader_cfg(cfg, image_dir), seed=0):
        inputs = model.data_preprocessor(batch, False)['inputs'][:num_images - seen]
        seen += len(inputs)
        yield inputs
        if seen >= num_images:
            return


def nth_image(model: nn.Module, cfg: Config, index: int, image_dir: Optional[str] = None) -> Tensor:
    """Image ``index`` (in dataset order) as a ``(1, C, H, W)`` input of ``model``."""
    seen = 0
    for inputs in image_batches(model, cfg, index + 1, image_dir):
        if seen + len(inputs) > index:
            return inputs[index - seen:index - seen + 1]
        seen += len(inputs)
    raise AnalysisError(f'--image-index {index} is out of range: there are only {seen} images.')
