"""What the command-line tools run: every input check, then the Runner (the floor above ``mmcausal.utils``, which
may use the models, datasets and hooks that ``utils`` must not)."""
from .checked_run import run

__all__ = ['run']
