"""What ``tools/train.py`` and ``tools/test.py`` share: common options, config merging, clear errors.

Errors that come from the user's config, data or checkpoint (:class:`~mmcausal.utils.errors.UserInputError`
and the few library errors listed in :data:`LIBRARY_USER_ERRORS`) end the program with one short last line
``<ErrorType>: <what to change>`` (details such as key lists on the lines above it, :func:`report_lines`) and exit
status 1; ``--debug`` (or ``MMCAUSAL_DEBUG=1``) shows the full traceback instead. Any other exception is a bug and
keeps its traceback.
"""
import argparse
import ast
import json
import linecache
import os
import os.path as osp
import re
import sys
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Type

from mmengine.config import Config, DictAction

from .checkpoint_coverage import PARTIAL_LOAD_FLAG, CheckpointMismatchError
from .dataset_check import DatasetFormatError, empty_dataset_error, sample_loading_error
from .errors import UserInputError
from .validation import ConfigValueError

DEBUG_ENV = 'MMCAUSAL_DEBUG'


class ConfigError(UserInputError, ValueError):
    """The config file cannot be loaded, ``--cfg-options`` cannot be merged, or it names an unknown type."""


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


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``--work-dir``, ``--cfg-options``, ``--launcher``, the launcher's ``--local-rank``, ``--allow-partial-load``
    and ``--debug``."""
    parser.add_argument('--work-dir', help='directory for logs, checkpoints and metrics '
                        '(default: the config\'s work_dir, else work_dirs/<config name>)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value pairs such as '
                        'train_cfg.max_epochs=2 or \'model.backbone.out_indices=[1,2]\'')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    # torch.distributed.launch passes --local-rank (torch >= 2.0) or --local_rank.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    parser.add_argument(PARTIAL_LOAD_FLAG, action='store_true',
                        help='accept a checkpoint (load_from, the evaluated one, Pretrained inits) that loads less '
                        'than half of the weights of the module it is loaded into (default: refused, it is usually '
                        'another model\'s checkpoint or has another key prefix)')
    parser.add_argument('--debug', action='store_true',
                        help='show the full traceback of errors in the config, data or checkpoint '
                        f'(default: one line saying what to change; also {DEBUG_ENV}=1)')


def check_common_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Export ``LOCAL_RANK`` (and ``MMCAUSAL_DEBUG`` for ``--debug``) and reject a missing config path."""
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if getattr(args, 'debug', False):
        os.environ[DEBUG_ENV] = '1'
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')


def is_checkpoint(path: str) -> bool:
    """Whether the local ``path`` is a checkpoint file or a sharded checkpoint: the directory of per-rank files
    (``rank0.pth`` ...) that sharded training (``FSDPStrategy``, ``state_dict_cfg='local'``) saves."""
    return osp.isfile(path) or osp.isfile(osp.join(path, 'rank0.pth'))


def check_checkpoint_argument(parser: argparse.ArgumentParser, path: str, what: str = 'checkpoint',
                              allow_sharded: bool = False) -> None:
    """Reject a local checkpoint path that does not exist (URLs are left to the loader); a sharded checkpoint
    directory only where ``allow_sharded`` (the runner tools, which read it under the sharded config)."""
    if '://' in path:
        return
    if not (is_checkpoint(path) if allow_sharded else osp.isfile(path)):
        hint = (' (a sharded checkpoint directory: merge it into one file with '
                'tools/model_converters/consolidate_sharded_checkpoint.py)' if is_checkpoint(path) else '')
        parser.error(f'{what} not found: {path}{hint}')


def read_config(path: str, cfg_options: Optional[dict] = None, **settings: Any) -> Config:
    """Load the config file ``path``, set ``settings`` (e.g. ``launcher``) and merge ``cfg_options``; a file that
    cannot be loaded or options that cannot be merged raise :class:`ConfigError`."""
    try:
        cfg = Config.fromfile(path)
    except (SyntaxError, FileNotFoundError, ImportError) as error:  # the config or one of its _base_ files
        raise ConfigError(f'{path} could not be loaded: {error}') from error
    cfg.merge_from_dict(settings)
    if cfg_options is not None:
        try:
            cfg.merge_from_dict(cfg_options)
        except (TypeError, KeyError) as error:
            raise ConfigError(f'--cfg-options could not be merged into {path}: {error}') from error
    return cfg


def load_config(args: argparse.Namespace) -> Config:
    """Load ``args.config`` and apply ``--cfg-options``, ``--launcher``, ``--allow-partial-load`` and ``--work-dir``.

    ``work_dir`` priority: command line > config > ``work_dirs/<config name>``. A config that cannot be
    loaded or merged ends the program with one line (:func:`user_errors_end_in_one_line`).
    """
    with user_errors_end_in_one_line():
        cfg = read_config(args.config, args.cfg_options, launcher=args.launcher)
    if args.allow_partial_load:
        cfg.allow_partial_load = True
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    return cfg


class PretrainedNotFoundError(UserInputError, FileNotFoundError):
    """A ``Pretrained`` init or ``load_from`` names a local file that does not exist."""


def _pretrained_paths(node: Any, where: str) -> Iterator[Tuple[str, str]]:
    if isinstance(node, dict):
        if node.get('type') == 'Pretrained' and isinstance(node.get('checkpoint'), str):
            yield f'{where}.checkpoint', node['checkpoint']
        for key, value in node.items():
            yield from _pretrained_paths(value, f'{where}.{key}')
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _pretrained_paths(value, f'{where}[{i}]')


def check_pretrained_paths(cfg: Config) -> None:
    """Raise :class:`PretrainedNotFoundError` naming the config key of a missing local checkpoint."""
    paths = list(_pretrained_paths(cfg.get('model', {}).to_dict() if cfg.get('model') else {}, 'model'))
    if cfg.get('load_from'):
        paths.append(('load_from', cfg.load_from))
    for key, path in paths:
        if '://' not in path and not (is_checkpoint(path) if key == 'load_from' else osp.isfile(path)):
            whole_model = '' if key == 'load_from' else (
                '(or fine-tune a whole trained model with --cfg-options load_from=PATH: its weights replace this init, '
                'which is then skipped)\n')
            raise PretrainedNotFoundError(
                f'{whole_model}{key} = {path!r} does not exist. Produce it (a pre-training run, '
                f'tools/model_converters/) or point to it: --cfg-options {key}=PATH.')


def _is_missing_pretrained(node: Any) -> bool:
    checkpoint = node.get('checkpoint') if isinstance(node, dict) and node.get('type') == 'Pretrained' else None
    return isinstance(checkpoint, str) and '://' not in checkpoint and not osp.isfile(checkpoint)


def _drop_missing_pretrained(node: Any, where: str) -> Iterator[Tuple[str, str]]:
    """Remove the ``Pretrained`` inits with a missing local file under ``node`` (a dict's entry becomes ``None``, a
    list's element goes); yield ``(config key, file)`` of each."""
    children = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) \
        if isinstance(node, list) else []
    for key, child in children:
        at = f'{where}.{key}' if isinstance(node, dict) else f'{where}[{key}]'
        if _is_missing_pretrained(child):
            yield f'{at}.checkpoint', child['checkpoint']
        else:
            yield from _drop_missing_pretrained(child, at)
    if isinstance(node, dict):
        node.update({key: None for key, child in children if _is_missing_pretrained(child)})
    elif isinstance(node, list):
        node[:] = [child for child in node if not _is_missing_pretrained(child)]


def skip_pretrained_replaced_by_load_from(cfg: Config) -> List[Tuple[str, str]]:
    """With ``load_from`` set (fine-tuning a whole trained model, ``--resume CKPT``), its weights replace every
    ``Pretrained`` init, so an init whose file is missing (the backbone's ImageNet file of a released detector) is
    skipped instead of stopping the run; returns ``(config key, file)`` of each skipped init. Inits whose file
    exists are kept (a partial ``load_from`` may rely on them)."""
    if not cfg.get('load_from') or not cfg.get('model'):
        return []
    return list(_drop_missing_pretrained(cfg.model, 'model'))


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


#: mmengine's registry builders (``mmengine/registry/build_functions.py``) -> their local naming the class being built
REGISTRY_BUILDERS = {'build_from_cfg': 'obj_cls', 'build_scheduler_from_cfg': 'scheduler_cls'}


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
    message = _original_message(error.args[0], type(error)) if error.args and isinstance(error.args[0], str) else ''
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


#: The longest last line of a user error's report (``<ErrorType>: <what to change>``); the rest goes on lines above it.
LAST_LINE_LIMIT = 160
#: Where a message's last line may be folded: after a '.' or ';' that ends a sentence or clause (not 'e.g.', 'i.e.')
_CLAUSE_END = re.compile(r'(?<!\be\.g)(?<!\bi\.e)[.;](?=\s)')


def _original_message(text: str, error_type: type) -> str:
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


def _clauses(text: str) -> List[str]:
    """``text`` cut after each '.' or ';' that ends a sentence or clause outside brackets."""
    clauses, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth = depth + 1 if char in '([{' else max(depth - 1, 0) if char in ')]}' else depth
        if depth == 0 and _CLAUSE_END.match(text, i):
            clauses.append(text[start:i + 1].strip())
            start = i + 1
    return [clause for clause in clauses + [text[start:].strip()] if clause]


def report_lines(error: BaseException) -> List[str]:
    """The report of the user error ``error``: detail lines, then ``'<ErrorType>: <what to change>'``.

    The lines of its message before the last are details (key or file lists). A last line longer than
    :data:`LAST_LINE_LIMIT` moves its leading sentences (or clauses ending in ';') to the details until the rest fits:
    a message ends with what to change, which stays on the last line.
    """
    prefix = f'{type(error).__name__}: '
    lines = [' '.join(line.split()) for line in _original_message(str(error), type(error)).splitlines()]
    lines = [line for line in lines if line] or ['']
    details, last = lines[:-1], _clauses(lines[-1]) or ['']
    while len(last) > 1 and len(prefix) + len(' '.join(last)) > LAST_LINE_LIMIT:
        details.append(last.pop(0))
    return details + [prefix + ' '.join(last)]


def one_line(error: BaseException) -> str:
    """The last line of :func:`report_lines`: ``'<ErrorType>: <what to change>'``."""
    return report_lines(error)[-1]


class UserInputExit(SystemExit):
    """The exit of a tool on a user-input error: its ``code`` is the report's last line, ``details`` the lines that
    were printed to stderr above it (:func:`report_lines`)."""

    def __init__(self, report: Sequence[str]) -> None:
        super().__init__(report[-1])
        self.details = list(report[:-1])


@contextmanager
def user_errors_end_in_one_line(debug: Optional[bool] = None) -> Iterator[None]:
    """Turn a user-input error raised inside the block into :class:`UserInputExit` (exit status 1): its details go
    to stderr, then the interpreter prints its last line, which says what to change (:func:`report_lines`).

    Other exceptions propagate unchanged, with their traceback. ``debug`` (default: ``$MMCAUSAL_DEBUG``,
    which ``--debug`` sets) lets user errors propagate too.
    """
    try:
        yield
    except Exception as error:
        debug = os.environ.get(DEBUG_ENV, '') not in ('', '0') if debug is None else debug
        user_error = None if debug else find_user_error(error)
        if user_error is None:
            raise
        exit_ = UserInputExit(report_lines(user_error))
        if exit_.details:
            print('\n'.join(exit_.details), file=sys.stderr, flush=True)
        raise exit_ from None


class WorkDirError(UserInputError, OSError):
    """The work dir cannot be a directory (a file is in its place, or in the place of one of its parents)."""


def check_work_dir(path: str) -> None:
    """Raise :class:`WorkDirError` unless ``path`` is a directory or can be made one (its nearest existing
    ancestor is a directory)."""
    existing = osp.abspath(path)
    while not osp.exists(existing):
        existing = osp.dirname(existing)
    if not osp.isdir(existing):
        where = 'it is a file' if existing == osp.abspath(path) else f'{existing!r} is a file'
        raise WorkDirError(f'the work dir {path!r} cannot be a directory: {where}. Choose another one with '
                           '--work-dir DIR.')


def check_sharded_load_from(cfg: Config) -> None:
    """Raise :class:`ConfigError` when a sharded run is to load a single-file checkpoint: ``FSDPStrategy`` with
    per-rank checkpoints (``state_dict_cfg='local'``, its default) reads ``load_from`` as a directory of them."""
    strategy, path = cfg.get('strategy') or {}, cfg.get('load_from')
    if strategy.get('type') == 'FSDPStrategy' and strategy.get('state_dict_cfg', 'local') == 'local' and path \
            and osp.isfile(path):
        raise ConfigError(
            f'{path} is a single checkpoint file, but the sharded strategy (FSDPStrategy) loads sharded checkpoints '
            "(directories of rank*.pth files). Start a sharded run from it with model.init_cfg=dict(type='Pretrained', "
            'checkpoint=...); test it with the unsharded config.')
