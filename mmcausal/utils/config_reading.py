"""Reading a config file with the overrides of the command line: :func:`read_config` for any tool, and
:func:`load_config` for the options :func:`mmcausal.utils.cli.add_common_arguments` adds.

A config that cannot be loaded, or overrides that cannot be merged into it, raise
:class:`~mmcausal.utils.errors.ConfigError`, which names the file and the cause.
"""
import argparse
import os.path as osp
from typing import Any, Optional

from mmengine.config import Config

from .error_report import user_errors_end_in_one_line
from .errors import ConfigError


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
