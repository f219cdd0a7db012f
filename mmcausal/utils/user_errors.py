"""Which exceptions the user's input caused: :func:`find_user_error` finds the user error behind an exception.

A :class:`~mmcausal.utils.errors.UserInputError` is one by definition. Some errors of the libraries (or torch) are
too, when only bad input causes them: those of :data:`LIBRARY_USER_ERRORS`, matched by type and message (also inside
a DataLoader worker's re-raise), and those recognised from the frames of their traceback (an empty dataset mmengine
failed to serialize, a file error while a transform loaded a sample, an unknown layer type, settings a component
refused while the registry built it). Each is turned into the user error that says what to change.
"""
import ast
import errno
import json
import linecache
import os.path as osp
import re
from typing import Any, Optional, Sequence, Tuple, Type

from .checkpoint_coverage import CheckpointMismatchError
from .dataset_check import DatasetFormatError, no_samples_error
from .errors import ConfigError, UserInputError
from .validation import ConfigValueError

#: Errors of the libraries (or torch) that only bad user input causes: (type, message pattern, the user error
#: to report, its message from the pattern's groups). Matched also inside a DataLoader worker's re-raise.
LIBRARY_USER_ERRORS: Sequence[Tuple[Type[BaseException], 're.Pattern[str]', Type[UserInputError], str]] = (
    (KeyError, re.compile(r'(\S+) is not in the (\S+) registry'), ConfigError,
     'the config names type {0!r}, which is not registered in {1}. Check its spelling, or import the module '
     'that registers it (custom_imports = dict(imports=[...])).'),
    (json.JSONDecodeError, re.compile(r'(.+)'), DatasetFormatError,
     'an annotation file is not valid JSON ({0}). Check the ann_file of the datasets.'),
    (AssertionError, re.compile(r'failed to load image: (\S+)'), DatasetFormatError,
     'image {0} could not be decoded (corrupt, empty or not an image). Replace it or drop it from the '
     'annotations.'),
    # (a FileNotFoundError's args[0] is a string only when re-raised from a DataLoader worker, i.e. data loading)
    (FileNotFoundError, re.compile(r'No such file or directory: (\S+)'), DatasetFormatError,
     'the dataset names a file that does not exist: {0}. Fix the annotations or add the file.'),
    (AssertionError, re.compile(r"number of subfolders \((\d+)\) doesn't match the number of specified classes "
                                r'\((\d+)\)'), DatasetFormatError,
     'the image folder has {0} class subfolders but metainfo.classes names {1} classes. Make them agree.'),
    (RuntimeError, re.compile(r'Found 0 files in subfolders of: (.+?)\. Supported extensions are: (\S+)'),
     DatasetFormatError, 'no image files in the class subfolders of {0} (extensions {1}).'),
    (ValueError, re.compile(r'persistent_workers option needs num_workers > 0'), ConfigError,
     'a dataloader has persistent_workers=True but num_workers=0; set persistent_workers=False or num_workers '
     '> 0.'),
    # torch.optim's checks, each by its exact wording
    (ValueError, re.compile(r'^Invalid (learning rate|(?:alpha|epsilon|eta|initial_accumulator_value|lr_decay|momentum|'
                            r'momentum_decay|rho|weight_decay) values?|beta parameter at index \d): (.+)$'),
     ConfigValueError, 'the optimizer refuses {0} = {1} (torch.optim); set a valid value in optim_wrapper.optimizer.'),
    (AssertionError, re.compile(r'^(\S+) is not in the pretrained model'), CheckpointMismatchError,
     "no key of the Pretrained checkpoint starts with prefix='{0}'. A checkpoint of the module alone needs no "
     'prefix (drop prefix=); otherwise it is another model\'s checkpoint.'),
    (IndexError, re.compile(r'Target (-?\d+) is out of bounds'), DatasetFormatError,
     'an annotation has label {0}, outside the classes the model predicts. Check num_classes of the heads '
     'against the dataset\'s classes and label values (mmseg: reduce_zero_label, ignore_index).'),
)

#: mmengine's registry builders (``mmengine/registry/build_functions.py``) -> their local naming the class being built
REGISTRY_BUILDERS = {'build_from_cfg': 'obj_cls', 'build_scheduler_from_cfg': 'scheduler_cls'}


def original_message(text: str, error_type: type) -> str:
    """``text``, the message of an ``error_type``; for one re-raised from a DataLoader worker (the worker's traceback
    text), the original message: what follows ``[module.]<ErrorType>: `` on the last line that starts with it."""
    if 'Original Traceback' not in text:
        return text
    lines = text.splitlines()
    start = re.compile(rf'^(?:[\w.]+\.)?{re.escape(error_type.__name__)}: ')
    first = max((i for i, line in enumerate(lines) if start.match(line)), default=None)
    if first is None:  # re-raised under another type: the last line is the original's
        return [line for line in lines if line.strip()][-1]
    return '\n'.join([start.sub('', lines[first])] + lines[first + 1:])


def empty_dataset_error(error: BaseException) -> Optional[DatasetFormatError]:
    """The :class:`DatasetFormatError` behind ``error`` if it is mmengine's ``BaseDataset`` failing to serialize
    an empty ``data_list`` (numpy's "need at least one array to concatenate", raised in ``_serialize_data``
    while the Runner builds a dataloader), else ``None``."""
    from mmengine.dataset import BaseDataset
    trace = error.__traceback__ if isinstance(error, ValueError) else None
    while trace is not None:
        dataset = trace.tb_frame.f_locals.get('self')
        if (trace.tb_frame.f_code.co_name == '_serialize_data' and isinstance(dataset, BaseDataset)
                and not dataset.data_list):
            return no_samples_error(dataset)
        trace = trace.tb_next
    return None


def _sample_file(transform: Any, results: dict) -> Tuple[str, str]:
    """``(what, path)`` of the file the loading ``transform`` was reading for the sample ``results``."""
    if type(transform).__name__.startswith('LoadAnnotations') and results.get('seg_map_path'):
        return 'segmentation map', results['seg_map_path']
    return 'image', results.get('img_path', '?')


def _is_file_content_error(error: BaseException) -> bool:
    """Whether ``error`` is what reading a sample's file raises when the file is missing, empty, truncated or not an
    image (not a system error such as too many open files, nor OpenCV refusing an operation on a decoded image)."""
    import cv2
    if isinstance(error, cv2.error):
        return 'imdecode' in str(error)
    return isinstance(error, OSError) and (error.errno is None or error.errno == errno.ENOENT)


def sample_loading_error(error: BaseException) -> Optional[DatasetFormatError]:
    """The :class:`DatasetFormatError` naming the file behind ``error`` if it is a file error (a missing file, or one
    that is empty, truncated or not an image) raised while a data transform loaded a sample, else ``None``. The file
    is found from the innermost transform's frame in the traceback; in a DataLoader worker, whose re-raise keeps only
    the message, :mod:`mmcausal.compat.transform_file_errors` converts it there."""
    from mmcv.transforms import BaseTransform
    trace, loading = (error.__traceback__ if _is_file_content_error(error) else None), None
    while trace is not None:
        local = trace.tb_frame.f_locals
        if isinstance(local.get('self'), BaseTransform) and isinstance(local.get('results'), dict):
            loading = local['self'], local['results']  # the innermost transform wins
        trace = trace.tb_next
    if loading is None:
        return None
    what, path = _sample_file(*loading)
    if isinstance(error, FileNotFoundError) or not osp.exists(path):
        missing = getattr(error, 'filename', None) or path
        return DatasetFormatError(f'the dataset names a file that does not exist: {missing}. Fix the annotations or '
                                  'add the file.')
    state = ('is empty' if osp.getsize(path) == 0 else 'is truncated' if 'truncated' in str(error)
             else f'could not be decoded ({" ".join(str(error).split())})')
    return DatasetFormatError(f'{what} {path} {state}. Replace it or drop it from the annotations.')


def unknown_layer_type_error(error: BaseException) -> Optional[ConfigError]:
    """The :class:`ConfigError` behind ``error`` if it is mmcv's ``KeyError`` for an unknown type in a layer config
    (``build_norm_layer`` / ``build_conv_layer`` ... say ``Cannot find None in registry``, without the type: it is
    taken from the builder's frame), else ``None``."""
    message = error.args[0] if isinstance(error, KeyError) and error.args else ''
    match = re.match(r'Cannot find \S+ in registry under scope name (\S+)', str(message))
    if not match:
        return None
    trace, layer_type = error.__traceback__, None
    while trace is not None:  # the innermost builder's ``layer_type``
        layer_type = trace.tb_frame.f_locals.get('layer_type', layer_type)
        trace = trace.tb_next
    return ConfigError(f'a layer config (norm_cfg, conv_cfg, ...) names type {layer_type!r}, which is not '
                       f'registered in {match.group(1)}. Check its spelling (e.g. BN, SyncBN, LN, GN, Conv2d).')


def _explicit_refusal_at(filename: str, line: int) -> bool:
    """Whether the statement of ``filename`` that spans ``line`` is a ``raise`` or an ``assert``."""
    try:
        tree = ast.parse(''.join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, (ast.Raise, ast.Assert)) and node.lineno <= line <= (node.end_lineno or node.lineno)
               for node in ast.walk(tree))


def refused_settings_error(error: BaseException) -> Optional[ConfigValueError]:
    """The :class:`ConfigValueError` behind ``error`` if a component the config names refused its settings while
    the registry built it, else ``None``: a ``ValueError`` or ``AssertionError`` raised under one of mmengine's
    registry builders, by an explicit ``raise`` / ``assert`` of the component being built (the innermost builder's
    class local; e.g. ``LinearLR(start_factor=1.5)``, ``ExponentialMovingAverage(momentum=1.5)``,
    ``LabelSmoothLoss(label_smooth_val=1.5)``). An error the interpreter raises (an unpacking ``ValueError``) or one
    from another object's code is a bug and keeps its traceback."""
    if not isinstance(error, (ValueError, AssertionError)):
        return None
    trace, component, raised_at = error.__traceback__, None, None
    while trace is not None:
        frame = trace.tb_frame
        built = REGISTRY_BUILDERS.get(frame.f_code.co_name)
        if built in frame.f_locals and frame.f_code.co_filename.endswith(osp.join('registry', 'build_functions.py')):
            component = frame.f_locals[built]
        raised_at, line = frame, trace.tb_lineno
        trace = trace.tb_next
    if not isinstance(component, type) or not isinstance(raised_at.f_locals.get('self'), component):
        return None
    if not _explicit_refusal_at(raised_at.f_code.co_filename, line):
        return None
    reason = str(error).strip().splitlines()[0] if str(error).strip() else \
        f'an assertion at {osp.basename(raised_at.f_code.co_filename)}:{line}'
    return ConfigValueError(f'{component.__name__} refuses the settings the config gives it: {reason.rstrip(".")}. '
                            'Change them in the config (or --cfg-options).')


def _library_user_error(error: BaseException) -> Optional[UserInputError]:
    """``error`` as the user error of :data:`LIBRARY_USER_ERRORS` it matches (or an empty dataset that
    mmengine failed to serialize, a file error while a sample was loaded, an unknown layer type, settings a
    component refused while it was built), else ``None``."""
    found = empty_dataset_error(error) or sample_loading_error(error) or unknown_layer_type_error(error)
    if found is not None:
        return found
    message = original_message(error.args[0], type(error)) if error.args and isinstance(error.args[0], str) else ''
    for error_type, pattern, user_error, explanation in LIBRARY_USER_ERRORS:
        match = pattern.search(message) if isinstance(error, error_type) else None
        if match:
            return user_error(explanation.format(*match.groups()))
    return refused_settings_error(error)


def find_user_error(error: BaseException) -> Optional[BaseException]:
    """The user-input error behind ``error``, or ``None`` if there is none (a bug).

    A user-input error is a :class:`UserInputError` (or one of :data:`LIBRARY_USER_ERRORS`). The chain is
    followed through ``__cause__`` (``raise ... from``) and through ``__context__`` only into an exception of
    the same type -- how builders re-raise a constructor's error with the class name prepended (mmcv 1.x's
    ``build_from_cfg``; mmengine 0.10.7 re-raises nothing) -- and the innermost user error is returned, since
    its message says what to change. An unrelated exception raised while handling a user error is therefore
    still reported as a bug, with its traceback.
    """
    found = None
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, UserInputError):
            found = error
        else:
            found = _library_user_error(error) or found
        inner = error.__cause__
        if inner is None and not error.__suppress_context__ and type(error.__context__) is type(error):
            inner = error.__context__
        error = inner
    return found
