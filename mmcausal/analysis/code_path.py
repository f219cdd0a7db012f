"""Which mmcausal source a model's training step runs: the files, functions and lines that one forward and backward
of a config's network execute (a measure of how many places a reader has to visit to follow the model).

The network is the config's ``model.backbone`` (a classifier, detector or segmentor: the part mmcausal provides) or
``model.network`` (a generative model), built at the config's input size with a random init; the forward and the
backward of ``output.sum()`` are traced with :func:`sys.settrace` (the CPU autograd engine runs Python backward
functions on the calling thread, so custom ``autograd.Function`` s are counted).
"""
import copy
import os.path as osp
import sys
from dataclasses import dataclass
from typing import Callable, Dict, Set, Tuple

import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from torch import Tensor, nn

from mmcausal.registry import MODELS

PACKAGE_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


@dataclass(frozen=True)
class CodePath:
    """Executed mmcausal source: ``lines[file]`` the line numbers run, ``functions[file]`` the functions entered."""
    lines: Dict[str, Set[int]]
    functions: Dict[str, Set[str]]

    @property
    def num_files(self) -> int:
        return len(self.lines)

    @property
    def num_lines(self) -> int:
        return sum(len(lines) for lines in self.lines.values())

    @property
    def num_functions(self) -> int:
        return sum(len(names) for names in self.functions.values())


def trace_code_path(step: Callable[[], None], root: str = PACKAGE_ROOT) -> CodePath:
    """Run ``step`` under :func:`sys.settrace`, recording the lines and functions it executes below ``root``."""
    lines: Dict[str, Set[int]] = {}
    functions: Dict[str, Set[str]] = {}

    def local_trace(frame, event, arg):
        if event == 'line':
            lines[frame.f_code.co_filename].add(frame.f_lineno)
        return local_trace

    def global_trace(frame, event, arg):
        filename = frame.f_code.co_filename
        if not filename.startswith(root) or filename == __file__:  # the step closure of :func:`network_step`
            return None
        lines.setdefault(filename, set())
        functions.setdefault(filename, set()).add(frame.f_code.co_qualname)
        return local_trace

    previous = sys.gettrace()
    sys.settrace(global_trace)
    try:
        step()
    finally:
        sys.settrace(previous)
    relative = {osp.relpath(name, osp.dirname(root)): value for name, value in lines.items()}
    return CodePath(relative, {osp.relpath(name, osp.dirname(root)): value for name, value in functions.items()})


def network_and_inputs(cfg: Config, batch_size: int = 2) -> Tuple[nn.Module, Tuple[Tensor, ...]]:
    """The config's network (``model.backbone`` or ``model.network``) in train mode and one random batch for it."""
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    torch.manual_seed(0)
    model_cfg = copy.deepcopy(cfg.model)
    if 'network' in model_cfg:
        network_cfg = model_cfg.network
        network = MODELS.build(network_cfg).train()
        size = network_cfg.get('input_size', 32)
        channels = network_cfg.get('in_channels', 4)
        inputs = (torch.randn(batch_size, channels, size, size), torch.rand(batch_size) * 999,
                  torch.randint(0, network_cfg.get('num_classes', 2), (batch_size, )))
        return network, inputs
    backbone_cfg = model_cfg.backbone
    backbone_cfg.pop('init_cfg', None)
    backbone = MODELS.build(backbone_cfg).train()
    size = backbone_cfg.get('img_size', backbone_cfg.get('pretrain_size', 64))
    return backbone, (torch.randn(batch_size, 3, size, size), )


def network_step(network: nn.Module, inputs: Tuple[Tensor, ...]) -> Callable[[], None]:
    """One forward of ``network`` and the backward of the sum of its (possibly nested) outputs."""

    def step() -> None:
        outputs = network(*inputs)
        flat = [outputs] if isinstance(outputs, Tensor) else list(_flatten(outputs))
        sum(output.float().sum() for output in flat).backward()

    return step


def config_code_path(cfg: Config) -> CodePath:
    """The :class:`CodePath` of one training step of ``cfg``'s network (after one untraced step, so that tables
    built once per process do not count)."""
    step = network_step(*network_and_inputs(cfg))
    step()
    return trace_code_path(step)


def _flatten(outputs):
    for item in outputs:
        if isinstance(item, Tensor):
            yield item
        else:
            yield from _flatten(item)
