"""Small utilities shared by mmcausal and its tools."""
from .checkpoint_loading import (
    UNSAFE_LOAD_ENV,
    CheckpointFormatError,
    ForeignObject,
    UnsafeCheckpointError,
    allowed_global_names,
    allowed_globals,
    extract_checkpoint_data,
    load_checkpoint_file,
)
from .dataset_check import DatasetNotFoundError, check_dataset_paths
from .distributed import end_distributed_run
from .errors import UserInputError
from .validation import ConfigValueError, InvalidChoiceError, check_choice

__all__ = [
    'UNSAFE_LOAD_ENV', 'CheckpointFormatError', 'ForeignObject', 'UnsafeCheckpointError', 'allowed_global_names',
    'allowed_globals', 'extract_checkpoint_data', 'load_checkpoint_file', 'DatasetNotFoundError', 'check_dataset_paths',
    'end_distributed_run', 'UserInputError', 'ConfigValueError', 'InvalidChoiceError', 'check_choice'
]
