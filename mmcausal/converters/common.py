"""What every official-checkpoint converter shares: safe loading, unwrapping, saving."""
import os
import os.path as osp
from typing import Dict, Optional

import torch
from torch import Tensor

from mmcausal.utils import load_checkpoint_file

WRAPPER_KEYS = ('model', 'module', 'state_dict')


def load_source_state_dict(path: str, trust: bool = False) -> Dict[str, Tensor]:
    """Load an official checkpoint (flat, or wrapped under ``model``/``module``/``state_dict``).

    Loads with ``weights_only=True``; a file that pickles more than tensors (e.g. an argparse ``args``)
    is refused with a message explaining the ``--trust`` opt-in, unless ``trust`` is set.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint {path!r} does not exist.')
    checkpoint = load_checkpoint_file(path, map_location='cpu', trust=trust)
    for key in WRAPPER_KEYS:
        if isinstance(checkpoint, dict) and key in checkpoint and isinstance(checkpoint[key], dict):
            checkpoint = checkpoint[key]
            break
    if not isinstance(checkpoint, dict) or not all(isinstance(v, Tensor) for v in checkpoint.values()):
        raise ValueError(f'{path!r} is not a state dict of tensors (nor one wrapped under {WRAPPER_KEYS}).')
    return checkpoint


def save_checkpoint(state_dict: Dict[str, Tensor], path: str, meta: Optional[dict] = None) -> None:
    """Save ``{'state_dict', 'meta'}`` with plain types only, so it loads with ``weights_only=True``."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    torch.save(dict(state_dict=state_dict, meta=dict(meta or {})), path)
