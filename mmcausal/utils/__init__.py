"""Small utilities shared by mmcausal and its tools."""
from .checkpoint_trust import (CheckpointFormatError, UntrustedCheckpointError, is_trusted,
                               load_checkpoint_file, trust_checkpoint, trust_store_path)

__all__ = [
    'CheckpointFormatError', 'UntrustedCheckpointError', 'is_trusted', 'load_checkpoint_file',
    'trust_checkpoint', 'trust_store_path'
]
