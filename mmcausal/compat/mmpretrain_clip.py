"""mmpretrain's CLIP modules import without its multimodal extras.

Patches: the ``CLIPZeroShot`` placeholder in ``mmpretrain.registry.MODELS``, then imports
``mmpretrain.models.multimodal.clip`` (mmpretrain 1.2 ``models/multimodal/__init__.py:4-24``).

Why: mmpretrain imports its multimodal models only when ``transformers`` is installed; otherwise it registers
placeholders that raise "install the multimodal extras" on build, and importing ``clip.py`` directly fails because
its ``@MODELS.register_module()`` meets the placeholder. The CLIP text transformer, projection and ``CLIPZeroShot``
(:mod:`mmcausal.models.clip` builds on them) need nothing of ``transformers``: only the HF tokenizer does, and
mmcausal's CLIP registers tokenizers of its own. With ``transformers`` installed the modules are already imported and
the shim does nothing.

When it can go: when mmpretrain imports its CLIP modules without ``transformers``.
"""
import importlib
import sys
from types import ModuleType

_MODULE = 'mmpretrain.models.multimodal.clip'


def import_mmpretrain_clip() -> ModuleType:
    """Return ``mmpretrain.models.multimodal.clip``, importing it in place of the registry's placeholder."""
    if _MODULE in sys.modules:
        return sys.modules[_MODULE]
    from mmpretrain.registry import MODELS

    registered = MODELS.module_dict.get('CLIPZeroShot')
    if registered is not None and not isinstance(registered, type):  # the "install the extras" placeholder
        MODELS.module_dict.pop('CLIPZeroShot')
    return importlib.import_module(_MODULE)
