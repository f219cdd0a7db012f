"""Checks of a config before anything is built: settings no model or run can take, incomplete loops, checkpoint
files that do not exist, a work dir that cannot be made.

Libraries check some of these late and with a traceback (torch's ``DataLoader`` raises a ``ValueError`` for
``batch_size=0``), others not at all (a negative ``drop_path_rate`` gives keep probabilities above 1, a
``mask_ratio`` of 1.5 masks every patch). :func:`check_config_values` raises :class:`ConfigValueError`
naming the setting, by class: a dataloader's ``batch_size`` is a positive integer and ``num_workers`` a
non-negative one; every rate, probability or ratio of the model that is a fraction (:data:`FRACTION_KEYS`) lies
in ``[0, 1]``. :func:`check_loops` raises :class:`~mmcausal.utils.errors.ConfigError` for a Runner loop that lacks
some of its parts (mmengine refuses it with a traceback that prints the whole dataloader configs, or a run without it
stops at ``runner.test()`` with a ``RuntimeError``).

A ``Pretrained`` init or ``load_from`` that names a missing local file stops the run before the model is built
(:func:`check_pretrained_paths`), unless ``load_from`` replaces the init anyway
(:func:`skip_pretrained_replaced_by_load_from`); :func:`check_work_dir` and :func:`check_sharded_load_from` refuse a
work dir that cannot be a directory and a single checkpoint file where a sharded run loads per-rank files.
"""
import os.path as osp
import re
from typing import Any, Iterator, List, Sequence, Tuple

from mmengine.config import Config

from .cli import is_checkpoint
from .errors import ConfigError, UserInputError
from .validation import ConfigValueError

#: model settings that are fractions (any prefix): drop / drop-path / dropout rates and ratios, probabilities, mask
#: rates and ratios (not every ``*_rate``: ``growth_rate``, ``dilation_rates`` ... are not fractions)
FRACTION_KEYS = re.compile(r'^(?:\w+_)?(?:drop|drop_rate|drop_path_rate|droppath_rate|drop_prob|dropout|dropout_rate|'
                           r'dropout_ratio|prob|mask_rate|mask_ratio)$')

#: The parts of each Runner loop: mmengine builds a loop from all of them, and refuses a config that sets only some.
LOOP_PARTS = dict(train=('train_dataloader', 'train_cfg', 'optim_wrapper'),
                  val=('val_dataloader', 'val_cfg', 'val_evaluator'),
                  test=('test_dataloader', 'test_cfg', 'test_evaluator'))
LOOP_NAMES = dict(train='training', val='validation', test='test')
#: A loop config to suggest for a missing ``val_cfg`` / ``test_cfg``
LOOP_TYPES = dict(val='ValLoop', test='TestLoop')


def _entries(node: Any, where: str) -> Iterator[Tuple[str, str, Any]]:
    """``(path, key, value)`` of every entry of the nested dicts and lists ``node``."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, (list, tuple)) else ()
    for key, value in items:
        path = f'{where}.{key}' if isinstance(key, str) else f'{where}[{key}]'
        yield path, key, value
        yield from _entries(value, path)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_config_values(cfg: Config, dataloaders: Sequence[str]) -> None:
    """Raise :class:`ConfigValueError` for a setting outside what any model or run accepts (see the module)."""
    for name in dataloaders:
        loader = cfg.get(name) or {}
        for key, minimum in (('batch_size', 1), ('num_workers', 0)):
            value = loader.get(key, minimum)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigValueError(f'{name}.{key} must be an integer >= {minimum}, got {value!r}.')
    model = cfg.get('model')
    for path, key, value in _entries(model.to_dict() if model else {}, 'model'):
        if isinstance(key, str) and FRACTION_KEYS.match(key) and _is_number(value) and not 0 <= value <= 1:
            raise ConfigValueError(f'{path} is a fraction and must be in [0, 1], got {value!r}.')


def _listing(names: Sequence[str]) -> str:
    return ', '.join(names[:-1]) + ' and ' + names[-1] if len(names) > 1 else names[0]


def _example(cfg: Config, loop: str, part: str) -> str:
    """How to set the missing ``part`` of ``loop``, where one is obvious (the other evaluation loop's part, or the
    default loop type), else ``''``."""
    if part.endswith('_cfg'):
        return f"{part} = dict(type='{LOOP_TYPES[loop]}')" if loop in LOOP_TYPES else ''
    other = dict(val='test', test='val').get(loop)
    twin = part.replace(loop, other, 1) if other else ''
    return f'{part} = {twin}' if twin and cfg.get(twin) is not None else ''


def check_loops(cfg: Config, runs: Sequence[str]) -> None:
    """Raise :class:`~mmcausal.utils.errors.ConfigError` for a Runner loop (:data:`LOOP_PARTS`) that lacks some parts
    (``None`` or absent): each loop the tool runs (``runs``: ``'train'``, ``'test'``) needs all of them, any other
    loop all or none."""
    for loop, parts in LOOP_PARTS.items():
        missing = [part for part in parts if cfg.get(part) is None]
        if not missing or (loop not in runs and len(missing) == len(parts)):
            continue
        examples = [example for example in (_example(cfg, loop, part) for part in missing) if example]
        one = len(missing) == 1
        set_them = f'Set {"it" if one else "them"} in the config' + (f' ({"; ".join(examples)})' if examples else '')
        given = [part for part in parts if part not in missing]
        without = '' if loop in runs else f', or {_listing(given)} to None to run without it'
        raise ConfigError(f'the {LOOP_NAMES[loop]} loop needs {_listing(missing)}, which {"is" if one else "are"} '
                          f'None. {set_them}{without}.')


class PretrainedNotFoundError(UserInputError, FileNotFoundError):
    """A ``Pretrained`` init or ``load_from`` names a local file that does not exist."""


def _pretrained_paths(node: Any, where: str) -> Iterator[Tuple[str, str]]:
    if isinstance(node, dict):
        if node.get('type') == 'Pretrained' and isinstance(node.get('checkpoint'), str):
            yield f'{where}.checkpoint', node['checkpoint']
        for key, value in node.items():
            yield from _pretrained_paths(value, f'{where}.{key}')
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _pretrained_paths(value, f'{where}[{i}]')


def check_pretrained_paths(cfg: Config) -> None:
    """Raise :class:`PretrainedNotFoundError` naming the config key of a missing local checkpoint."""
    paths = list(_pretrained_paths(cfg.get('model', {}).to_dict() if cfg.get('model') else {}, 'model'))
    if cfg.get('load_from'):
        paths.append(('load_from', cfg.load_from))
    for key, path in paths:
        if '://' not in path and not (is_checkpoint(path) if key == 'load_from' else osp.isfile(path)):
            whole_model = '' if key == 'load_from' else (
                '(or fine-tune a whole trained model with --cfg-options load_from=PATH: its weights replace this init, '
                'which is then skipped)\n')
            raise PretrainedNotFoundError(
                f'{whole_model}{key} = {path!r} does not exist. Produce it (a pre-training run, '
                f'tools/model_converters/) or point to it: --cfg-options {key}=PATH.')


def _is_missing_pretrained(node: Any) -> bool:
    checkpoint = node.get('checkpoint') if isinstance(node, dict) and node.get('type') == 'Pretrained' else None
    return isinstance(checkpoint, str) and '://' not in checkpoint and not osp.isfile(checkpoint)


def _drop_missing_pretrained(node: Any, where: str) -> Iterator[Tuple[str, str]]:
    """Remove the ``Pretrained`` inits with a missing local file under ``node`` (a dict's entry becomes ``None``, a
    list's element goes); yield ``(config key, file)`` of each."""
    children = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) \
        if isinstance(node, list) else []
    for key, child in children:
        at = f'{where}.{key}' if isinstance(node, dict) else f'{where}[{key}]'
        if _is_missing_pretrained(child):
            yield f'{at}.checkpoint', child['checkpoint']
        else:
            yield from _drop_missing_pretrained(child, at)
    if isinstance(node, dict):
        node.update({key: None for key, child in children if _is_missing_pretrained(child)})
    elif isinstance(node, list):
        node[:] = [child for child in node if not _is_missing_pretrained(child)]


def skip_pretrained_replaced_by_load_from(cfg: Config) -> List[Tuple[str, str]]:
    """With ``load_from`` set (fine-tuning a whole trained model, ``--resume CKPT``), its weights replace every
    ``Pretrained`` init, so an init whose file is missing (the backbone's ImageNet file of a released detector) is
    skipped instead of stopping the run; returns ``(config key, file)`` of each skipped init. Inits whose file
    exists are kept (a partial ``load_from`` may rely on them)."""
    if not cfg.get('load_from') or not cfg.get('model'):
        return []
    return list(_drop_missing_pretrained(cfg.model, 'model'))


class WorkDirError(UserInputError, OSError):
    """The work dir cannot be a directory (a file is in its place, or in the place of one of its parents)."""


def check_work_dir(path: str) -> None:
    """Raise :class:`WorkDirError` unless ``path`` is a directory or can be made one (its nearest existing
    ancestor is a directory)."""
    existing = osp.abspath(path)
    while not osp.exists(existing):
        existing = osp.dirname(existing)
    if not osp.isdir(existing):
        where = 'it is a file' if existing == osp.abspath(path) else f'{existing!r} is a file'
        raise WorkDirError(f'the work dir {path!r} cannot be a directory: {where}. Choose another one with '
                           '--work-dir DIR.')


def check_sharded_load_from(cfg: Config) -> None:
    """Raise :class:`ConfigError` when a sharded run is to load a single-file checkpoint: ``FSDPStrategy`` with
    per-rank checkpoints (``state_dict_cfg='local'``, its default) reads ``load_from`` as a directory of them."""
    strategy, path = cfg.get('strategy') or {}, cfg.get('load_from')
    if strategy.get('type') == 'FSDPStrategy' and strategy.get('state_dict_cfg', 'local') == 'local' and path \
            and osp.isfile(path):
        raise ConfigError(
            f'{path} is a single checkpoint file, but the sharded strategy (FSDPStrategy) loads sharded checkpoints '
            "(directories of rank*.pth files). Start a sharded run from it with model.init_cfg=dict(type='Pretrained', "
            'checkpoint=...); test it with the unsharded config.')
