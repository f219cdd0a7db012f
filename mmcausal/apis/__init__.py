"""What the command-line tools run: every input check, then the Runner (the floor above ``mmcausal.utils``, which
may use the models, datasets and hooks that ``utils`` must not); and one-call image inference."""
from .checked_run import run
from .inference import build_inferencer, config_dataset_meta, infer_and_draw

__all__ = ['run', 'build_inferencer', 'config_dataset_meta', 'infer_and_draw']
