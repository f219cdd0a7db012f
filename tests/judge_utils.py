"""The image-generation twins' judge for the tests: trained once by ``tools/train.py`` on the real shapes images, with
the 32 px train / val reference files (ADM ``.npz``) that ``tools/generation/evaluate.py --ref`` reads. Tests get it
from the session-scoped fixture ``generation_judge`` (tests/conftest.py), trained once (about a minute and a half
on 2 cores); its users share one xdist group.
"""
import runpy
import sys
from pathlib import Path
from typing import Dict

from e2e_utils import ROOT, data_options, run_command

JUDGE_CONFIG = 'configs/generation_judge/judge-cnn-nano_1xb64-20e_shapes-32px.py'
JUDGE_EPOCHS = 20
MAKE_REFERENCE = str(ROOT / 'tools/generation/make_reference_npz.py')


def train_judge(shapes_root: Path, work_dir: Path) -> Dict[str, Path]:
    """Train the judge on ``shapes_root/imagenet`` into ``work_dir``; return its ``checkpoint`` and the ``train`` /
    ``val`` images BOX-downsampled to 32 px as ``.npz`` files (labels = class indices)."""
    run_command([sys.executable, 'tools/train.py', JUDGE_CONFIG, '--work-dir', str(work_dir), '--cfg-options',
                 *data_options(shapes_root, 'imagenet')], timeout=900)
    files = dict(checkpoint=work_dir / f'epoch_{JUDGE_EPOCHS}.pth')
    make_reference = runpy.run_path(MAKE_REFERENCE, run_name='tool')['main']
    for split in ('train', 'val'):
        files[split] = work_dir / f'{split}.npz'
        make_reference([str(shapes_root / 'imagenet' / split), str(files[split]), '--size', '32'])
    return files


def random_judge_checkpoint(path: Path) -> Path:
    """An untrained judge saved as ``tools/train.py`` saves one (its config in ``meta``): the judge's code path for
    tests that need no trained network."""
    import torch
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(str(ROOT / JUDGE_CONFIG))
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    model = MODELS.build(dict(cfg.model, data_preprocessor=cfg.data_preprocessor))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(dict(meta=dict(cfg=cfg.pretty_text), state_dict=model.state_dict()), path)
    return path
