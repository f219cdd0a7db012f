"""Settings that no model or run can take, refused before anything is built.

Libraries check some of these late and with a traceback (torch's ``DataLoader`` raises a ``ValueError`` for
``batch_size=0``), others not at all (a negative ``drop_path_rate`` gives keep probabilities above 1, a
``mask_ratio`` of 1.5 masks every patch). :func:`check_config_values` raises :class:`ConfigValueError`
naming the setting, by class: a dataloader's ``batch_size`` is a positive integer and ``num_workers`` a
non-negative one; every rate, probability or ratio of the model that is a fraction (:data:`FRACTION_KEYS`) lies
in ``[0, 1]``.
"""
import re
from typing import Any, Iterator, Sequence, Tuple

from mmengine.config import Config

from .validation import ConfigValueError

#: model settings that are fractions (any prefix): drop / drop-path / dropout rates and ratios, probabilities, mask
#: rates and ratios (not every ``*_rate``: ``growth_rate``, ``dilation_rates`` ... are not fractions)
FRACTION_KEYS = re.compile(r'^(?:\w+_)?(?:drop|drop_rate|drop_path_rate|droppath_rate|drop_prob|dropout|dropout_rate|'
                           r'dropout_ratio|prob|mask_rate|mask_ratio)$')


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
