"""What every official-checkpoint converter shares: safe loading, unwrapping, key renaming, saving, the CLI."""
import argparse
import os
import os.path as osp
import re
import sys
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from mmcausal.utils import extract_checkpoint_data

WRAPPER_KEYS = ('model', 'module', 'state_dict')


def load_source_state_dict(path: str, wrapper_key: Optional[str] = None,
                           flat_key: Optional[str] = None) -> Dict[str, Tensor]:
    """Load an official checkpoint (flat, or wrapped under ``model``/``module``/``state_dict``, or under
    ``wrapper_key`` when given, e.g. ``model_ema``). ``flat_key``: what a flat file holds (e.g. ``'ema'`` for DiT's
    released files): asking for it (``wrapper_key == flat_key``) also accepts a flat file.

    Research checkpoints often pickle more than tensors (an argparse ``args``, a yacs config, an
    optimizer): :func:`~mmcausal.utils.extract_checkpoint_data` takes the tensors out without running
    any of the file's code, whatever else it holds.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint {path!r} does not exist.')
    checkpoint, foreign = extract_checkpoint_data(path, map_location='cpu')
    if foreign:
        print(f'{path}: ignored objects of {", ".join(foreign)} (kept as inert data, never executed)')
    wrapped = isinstance(checkpoint, dict) and isinstance(checkpoint.get(wrapper_key), dict)
    if wrapper_key is not None and not wrapped and wrapper_key == flat_key and _is_flat(checkpoint):
        return checkpoint
    if wrapper_key is not None and not wrapped:
        found = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise ValueError(f'{path!r} has no {wrapper_key!r} weights (it holds {found}).')
    for key in ((wrapper_key, ) if wrapper_key else WRAPPER_KEYS):
        if isinstance(checkpoint, dict) and key in checkpoint and isinstance(checkpoint[key], dict):
            checkpoint = checkpoint[key]
            break
    if not _is_flat(checkpoint):
        raise ValueError(f'{path!r} is not a state dict of tensors (nor one wrapped under {WRAPPER_KEYS}).')
    return checkpoint


def _is_flat(checkpoint) -> bool:
    """Whether ``checkpoint`` is a plain state dict (a dict of tensors)."""
    return isinstance(checkpoint, dict) and all(isinstance(v, Tensor) for v in checkpoint.values())


def save_checkpoint(state_dict: Dict[str, Tensor], path: str, meta: Optional[dict] = None) -> None:
    """Save ``{'state_dict', 'meta'}`` with plain types only, so it loads with ``weights_only=True``."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    torch.save(dict(state_dict=state_dict, meta=dict(meta or {})), path)


def rename_key(key: str, renames: Sequence[Tuple[str, str]]) -> Optional[str]:
    """``key`` rewritten by the first ``(pattern, replacement)`` regex that matches it, or ``None``."""
    for pattern, replacement in renames:
        new_key, count = re.subn(pattern, replacement, key)
        if count:
            return new_key
    return None


def converter_main(prog: str, description: str, src_help: str,
                   convert: Callable[[Dict[str, Tensor]], Dict[str, Tensor]],
                   describe: Optional[Callable[[Dict[str, Tensor]], Tuple[dict, str]]] = None,
                   add_options: Optional[Callable[[argparse.ArgumentParser], None]] = None) -> None:
    """The command line every ``tools/model_converters/*2mmcausal.py`` shares: ``SRC DST``.

    Loads SRC safely, converts it, optionally prints ``describe(converted)[1]`` and stores its
    ``[0]`` in the checkpoint meta, saves DST; a bad file ends with ``prog: message`` and exit status 1.
    With ``add_options`` (which adds converter-specific arguments) ``convert`` is called as
    ``convert(state_dict, args)``, ``args.source_key`` (if set) picks the weights inside SRC and ``args.flat_key``
    (if set) names what a flat SRC holds (see :func:`load_source_state_dict`).
    """
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help=src_help)
    parser.add_argument('dst', help='output mmcausal checkpoint (.pth)')
    if add_options is not None:
        add_options(parser)
    args = parser.parse_args()
    try:
        source = load_source_state_dict(args.src, getattr(args, 'source_key', None), getattr(args, 'flat_key', None))
        state_dict = convert(source, args) if add_options is not None else convert(source)
    except (OSError, RuntimeError, ValueError, KeyError) as error:
        # KeyError's str() is the repr of its message; show the message itself
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        sys.exit(f'{prog}: {message}')
    meta = dict(converted_from=args.src, converter=prog)
    if describe is not None:
        meta['architecture'], text = describe(state_dict)
        print(text)
    save_checkpoint(state_dict, args.dst, meta=meta)
    print(f'Saved {len(state_dict)} tensors to {args.dst}')


#: the deit ``LLaMAMLP`` halves of a SwiGLU: ``c_fc1`` the gate (through SiLU), ``c_fc2`` the up projection
SWIGLU_GATE, SWIGLU_UP = '.mlp.c_fc1.weight', '.mlp.c_fc2.weight'


def swiglu_entry(official: Dict[str, Tensor], key: str, renames: Sequence[Tuple[str, str]]) -> Optional[dict]:
    """The fused ``ffn.w12 = [gate; up]`` entry of an official SwiGLU half: ``{w12 key: tensor}`` at a gate key,
    ``{}`` at an up key (its gate carries it), ``None`` for any other key. ``renames`` map the block's
    ``mlp.c_proj.weight`` to its ``ffn.w3`` name, whose ``w3`` becomes ``w12``.

    Raises:
        KeyError: on a half without its partner.
    """
    for own, partner in ((SWIGLU_GATE, SWIGLU_UP), (SWIGLU_UP, SWIGLU_GATE)):
        if key.endswith(own):
            block = key[:-len(own)]
            if block + partner not in official:
                raise KeyError(f'{key!r} has no matching {block + partner!r}: the SwiGLU needs both halves.')
            if own == SWIGLU_UP:
                return {}
            down = rename_key(block + '.mlp.c_proj.weight', renames)
            if down is None:
                raise KeyError(f'{key!r} is not in a block of this model: its SwiGLU has no known place.')
            fused_key = down.replace('ffn.w3', 'ffn.w12')
            return {fused_key: torch.cat([official[key], official[block + SWIGLU_UP]], dim=0)}
    return None


def rename_with_fused_swiglu(official: Dict[str, Tensor], renames: Sequence[Tuple[str, str]], expected: str,
                             rename: Optional[Callable[[str], Optional[str]]] = None) -> Dict[str, Tensor]:
    """Every tensor of a deit-format VisionLLaMA state dict under its new name (``rename(key)``, by default
    :func:`rename_key` with ``renames``), the SwiGLU halves fused (:func:`swiglu_entry`).

    Raises:
        KeyError: on a key without a new name (the message says what was ``expected``), or a lone SwiGLU half.
    """
    converted: Dict[str, Tensor] = {}
    for key, value in official.items():
        swiglu = swiglu_entry(official, key, renames)
        if swiglu is not None:
            converted.update(swiglu)
            continue
        new_key = rename(key) if rename is not None else rename_key(key, renames)
        if new_key is None:
            raise KeyError(f'Unexpected key {key!r}; expected {expected}.')
        converted[new_key] = value
    return converted

