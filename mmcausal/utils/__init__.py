"""Small utilities shared by mmcausal and its tools."""
from .checkpoint_trust import (CheckpointFormatError, UntrustedCheckpointError, is_trusted,
                               load_checkpoint_file, trust_checkpoint, trust_store_path)
from .dataset_check import DatasetNotFoundError, check_dataset_paths

__all__ = [
    'CheckpointFormatError', 'UntrustedCheckpointError', 'is_trusted', 'load_checkpoint_file',
    'trust_checkpoint', 'trust_store_path', 'DatasetNotFoundError', 'check_dataset_paths'
]
