"""Refuse a checkpoint that leaves most of a model's weights unloaded.

mmengine loads checkpoints with ``strict=False`` (``load_from``, ``tools/test.py``, ``Pretrained`` inits) and only
logs the keys that did not match, so another model's checkpoint, or one whose keys sit under another prefix
(``backbone.``, ``module.``), gives a randomly initialised model that trains or evaluates without a word.
:func:`check_checkpoint_coverage` (applied to every mmengine load by :mod:`mmcausal.compat`) raises
:class:`CheckpointMismatchError` when the checkpoint loads less than :data:`MIN_LOADED_FRACTION` of the receiving
module's weights, counted in elements: its parameters and floating-point persistent buffers (normalisation
statistics). Integer buffers (counters, index tables) and non-persistent ones (tables recomputed from the
config) are not weights. Loads for evaluation (``tools/test.py``, the inferencers, the ONNX export) run inside
:func:`evaluation_loads`, which also refuses a checkpoint that loads none of a part of the model used in inference
(``head``, ``neck``, ``decode_head`` ...): a backbone-only file in a segmentor, say, loads well over half of it. A
partial load on purpose runs inside :func:`partial_loads_allowed` (``--allow-partial-load`` of the tools).
"""
import re
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Collection, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from torch import nn

from .errors import UserInputError

#: a checkpoint that loads less than this fraction of a module's weight elements is refused
MIN_LOADED_FRACTION = 0.5
#: model parts that inference never runs (mmseg's auxiliary heads): evaluation may go without them
TRAINING_ONLY_PARTS = ('auxiliary_head', )
#: the tools' flag that allows a partial load (also ``--cfg-options allow_partial_load=True``)
PARTIAL_LOAD_FLAG = '--allow-partial-load'
_SIZE_MISMATCH = re.compile(r'size mismatch for (\S+?):')
_partial_allowed: ContextVar[bool] = ContextVar('mmcausal_partial_loads_allowed', default=False)
_evaluating: ContextVar[bool] = ContextVar('mmcausal_evaluation_loads', default=False)


class CheckpointMismatchError(UserInputError, ValueError):
    """A checkpoint does not fit the model it is loaded into (another model's, another prefix, another size)."""


@contextmanager
def partial_loads_allowed(allowed: bool = True) -> Iterator[None]:
    """Inside the block, checkpoints that load only part of a module pass (``allowed=False``: they are refused)."""
    token = _partial_allowed.set(allowed)
    try:
        yield
    finally:
        _partial_allowed.reset(token)


@contextmanager
def evaluation_loads() -> Iterator[None]:
    """Inside the block, checkpoints are loaded to evaluate the model: every part of it that inference runs must
    load at least one weight (:data:`TRAINING_ONLY_PARTS` excepted)."""
    token = _evaluating.set(True)
    try:
        yield
    finally:
        _evaluating.reset(token)


def weight_sizes(module: nn.Module) -> Dict[str, int]:
    """``state_dict`` key -> number of elements, for the module's weights (parameters and floating-point
    persistent buffers)."""
    return {key: tensor.numel() for key, tensor in module.state_dict(keep_vars=True).items()
            if tensor.is_floating_point() or tensor.is_complex()}


def size_mismatched_keys(error_messages: Iterable[str]) -> List[str]:
    """The keys of torch's ``size mismatch for <key>: ...`` load errors (mmengine collects and only logs them)."""
    return [match.group(1) for message in error_messages for match in [_SIZE_MISMATCH.search(message)] if match]


def _first_part_counts(keys: Iterable[str]) -> Counter:
    return Counter(key.split('.', 1)[0] for key in keys if '.' in key)


def _best_prefix(keys: Collection[str], targets: Collection[str]) -> Optional[str]:
    """The first key component ``p`` whose removal from ``keys`` matches the most ``targets`` (at least half of
    the keys under it), or ``None``."""
    best, best_hits = None, 0
    for part, count in _first_part_counts(keys).items():
        hits = sum(key[len(part) + 1:] in targets for key in keys if key.startswith(part + '.'))
        if hits * 2 >= count and hits > best_hits:
            best, best_hits = part, hits
    return best


def _listed(keys: Sequence[str], shown: int = 3) -> str:
    return ', '.join(keys[:shown]) + (', ...' if len(keys) > shown else '')


def likely_cause(model_keys: Collection[str], checkpoint_keys: Collection[str], missing: Collection[str],
                 mismatched: Sequence[str]) -> Tuple[str, str]:
    """Why ``checkpoint_keys`` miss ``model_keys`` (``missing``: model keys the checkpoint lacks; ``mismatched``: keys
    of other shapes): ``(evidence, cause and fix)``, the evidence a line of keys (or ``''``), the cause one sentence."""
    prefix = _best_prefix(checkpoint_keys, model_keys)
    if prefix is not None:
        return '', (f"Its keys carry the prefix '{prefix}.': load it with init_cfg=dict(type='Pretrained', "
                    f"checkpoint=..., prefix='{prefix}.').")
    part = _best_prefix(model_keys, checkpoint_keys)
    if part is not None:
        return '', (f"It holds only the '{part}' of this model: load it into model.{part} with "
                    "init_cfg=dict(type='Pretrained', checkpoint=...).")
    if len(mismatched) > len(missing):
        return (f'{len(mismatched)} of its tensors have other shapes: {_listed(mismatched)}',
                'It is another size of this model (arch, embed_dims, patch_size, num_classes).')
    shared = len(set(checkpoint_keys) & set(model_keys))
    return (f'its keys: {_listed(sorted(checkpoint_keys), 2) or "none"} ({shared} of its {len(checkpoint_keys)} are '
            f'keys of this model)', 'It is a checkpoint of another model: use one of this model.')


def check_checkpoint_coverage(module: nn.Module, checkpoint_keys: Collection[str], missing: Collection[str],
                              mismatched: Collection[str]) -> None:
    """Raise :class:`CheckpointMismatchError` if the load left most of ``module``'s weights unloaded. Its message lists
    the keys (and the flag that accepts a partial load) on lines before its last, which says what the checkpoint is and
    what to do.

    Args:
        module: the module the checkpoint was loaded into (unwrapped).
        checkpoint_keys: the keys of the loaded state dict.
        missing: module keys the state dict did not have (as the loader reports them, after its key hooks).
        mismatched: module keys whose tensor in the state dict had another shape (not loaded).
    """
    if _partial_allowed.get():
        return
    weights = weight_sizes(module)
    total = sum(weights.values())
    missing, mismatched = set(missing), list(mismatched)
    absent = [key for key in weights if key in missing]
    unloaded = [key for key in weights if key in missing or key in mismatched]
    loaded = total - sum(weights[key] for key in unloaded)
    if total and loaded >= MIN_LOADED_FRACTION * total:
        if _evaluating.get():
            _check_every_part_loads(module, weights, set(unloaded))
        return
    if total == 0:
        return
    evidence, cause = likely_cause(list(weights), list(checkpoint_keys), absent, mismatched)
    lines = [f'not loaded: {_listed(unloaded)} ({100 * (total - loaded) / total:.0f} % of the elements)', evidence,
             f'(to load it partly on purpose: {PARTIAL_LOAD_FLAG})',
             f'the checkpoint loads {len(weights) - len(unloaded)} of the {len(weights)} weights of '
             f'{type(module).__name__}. {cause}']
    raise CheckpointMismatchError('\n'.join(line for line in lines if line))


def _check_every_part_loads(module: nn.Module, weights: Dict[str, int], unloaded: Collection[str]) -> None:
    """Raise :class:`CheckpointMismatchError` if a top-level part of ``module`` with weights loaded none of them."""
    parts = Counter(key.split('.', 1)[0] for key in weights if '.' in key)
    missed = Counter(key.split('.', 1)[0] for key in unloaded if '.' in key)
    empty = [part for part, count in parts.items() if missed[part] == count and part not in TRAINING_ONLY_PARTS]
    if not empty:
        return
    loaded_parts = [part for part in parts if missed[part] < parts[part]]
    not_loaded = [key for key in weights if key.split('.', 1)[0] in empty]
    raise CheckpointMismatchError(
        f'not loaded: {_listed(not_loaded)}; loaded: only {", ".join(loaded_parts)}\n'
        f'the checkpoint loads none of the weights of {type(module).__name__}.{" / ".join(empty)}: evaluating would '
        f'use {"it" if len(empty) == 1 else "them"} as randomly initialised. It is likely a backbone\'s file: evaluate '
        f'the trained {type(module).__name__}\'s checkpoint, or load it anyway with {PARTIAL_LOAD_FLAG}.')
