"""Settings that no model or run can take, refused before anything is built.

Libraries check some of these late and with a traceback (torch's ``DataLoader`` raises a ``ValueError`` for
``batch_size=0``), others not at all (a negative ``drop_path_rate`` gives keep probabilities above 1, a
``mask_ratio`` of 1.5 masks every patch). :func:`check_config_values` raises :class:`ConfigValueError`
naming the setting, by class: a dataloader's ``batch_size`` is a positive integer and ``num_workers`` a
non-negative one; every rate, probability or ratio of the model that is a fraction (:data:`FRACTION_KEYS`) lies
in ``[0, 1]``. :func:`check_loops` raises :class:`~mmcausal.utils.cli.ConfigError` for a Runner loop that lacks some
of its parts (mmengine refuses it with a traceback that prints the whole dataloader configs, or a run without it
stops at ``runner.test()`` with a ``RuntimeError``).
"""
import re
from typing import Any, Iterator, Sequence, Tuple

from mmengine.config import Config

from .cli import ConfigError
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
    """Raise :class:`~mmcausal.utils.cli.ConfigError` for a Runner loop (:data:`LOOP_PARTS`) that lacks some parts
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
