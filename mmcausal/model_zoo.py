"""mmcausal's model zoo in mmpretrain's model hub: after ``import mmcausal``, ``mmpretrain.list_models('*llama*')``
finds our models by their metafile names and ``mmpretrain.get_model(name, pretrained=PATH)`` builds one from its
config (and loads ``PATH``), as for mmpretrain's own models.

Registered: every model of ``model-index.yml`` whose config builds in mmpretrain's registry, i.e. the classifiers,
MAE pre-training and the DiT / SiT generators (their default scope is ``mmpretrain``). Not registered: the
segmentors (ADE20K) and detectors (COCO), which are mmseg's and mmdet's models: ``get_model`` builds under
mmpretrain's scope, where ``EncoderDecoder`` or ``MaskRCNN`` do not exist; build those with mmseg's ``init_model`` /
mmdet's ``init_detector`` from the config file. ``pretrained=True`` loads nothing for our models (no metafile has
``Weights`` of ours: mmpretrain warns and keeps the random init); pass the converted file's path instead.

The index and the configs are read from the source tree (an editable install, as ``tools/setup_env.sh`` makes it);
an installed copy without them registers nothing.
"""
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
MODEL_INDEX = ROOT / 'model-index.yml'
#: Training data of mmseg's and mmdet's configs (also the shapes twins' "ADE20K layout" / "COCO layout").
DENSE_DATASETS = ('ADE20K', 'COCO')


def builds_in_mmpretrain(training_data) -> bool:
    """Whether a metafile model with this ``Training Data`` (a name or a list) is one of mmpretrain's kinds of model
    (not a segmentor or detector); ``tests/test_model_zoo.py`` checks it against every config's default scope."""
    names = [training_data] if isinstance(training_data, str) else list(training_data or [])
    return not any(dataset in name for name in names for dataset in DENSE_DATASETS)


def register_model_index() -> List[str]:
    """Register the models of ``model-index.yml`` that mmpretrain builds (module docstring) in its ``ModelHub``,
    config paths resolved against the source tree; names already there are left alone (so a second call, or a
    clash with an mmpretrain name, changes nothing). Returns the names it registered."""
    if not MODEL_INDEX.is_file():
        return []
    from mmpretrain.apis.model import ModelHub
    from modelindex.load_model_index import load

    index = load(str(MODEL_INDEX))
    index.build_models_with_collections()
    registered = []
    for model in index.models:
        name = model.name.lower()
        if ModelHub.has(name) or not builds_in_mmpretrain(model.metadata.training_data):
            continue
        model.config = str(ROOT / model.config)
        # ModelHub.register_model_index takes whole index files only; this is its registration, per model
        ModelHub._models_dict[name] = model
        registered.append(name)
    return registered
