"""Checkpoints that pickle a class the loading process cannot import, as official research files do."""
import os
import sys
from pathlib import Path

import torch


def save_with_config_node(data: dict, path: Path, config: dict) -> None:
    """``torch.save(dict(data, config=CfgNode(config)))`` where ``CfgNode`` is a dict subclass named
    ``fake_yacs_config.CfgNode`` (like yacs's), importable only while saving: to any loader it is a foreign class."""
    module = type(os)('fake_yacs_config')

    class CfgNode(dict):
        pass

    CfgNode.__module__, CfgNode.__qualname__ = module.__name__, 'CfgNode'
    module.CfgNode = CfgNode
    sys.modules[module.__name__] = module
    try:
        torch.save(dict(data, config=CfgNode({k: CfgNode(v) if isinstance(v, dict) else v
                                                for k, v in config.items()})), path)
    finally:
        del sys.modules[module.__name__]
