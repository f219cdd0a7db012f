"""Convert an official plain VisionLLaMA checkpoint into an mmcausal checkpoint.

    python tools/model_converters/visionllama2mmcausal.py epoch_800.pth \\
        checkpoints/vision-llama-base-p16_mae-800e_in1k.pth

Two official formats are recognised by their keys:

* the MAE checkpoints (mmengine, ``backbone.layers.*``; released): the output keeps the ``backbone.`` /
  ``neck.`` / ``head.`` prefixes. Fine-tuning configs load it with
  ``init_cfg=dict(type='Pretrained', checkpoint=DST, prefix='backbone.')`` on a
  ``VisionLLaMA(layout='official_mae', rope_mode='2d', with_cls_token=False)`` backbone, and the MAE
  pre-training config can resume from it (the decoder keeps mmpretrain's names);
* the supervised deit checkpoints (``checkpoint.pth`` of ``deit/main_b.py``, ``blocks.*``; none were released):
  the output is a whole classifier (``backbone.`` + ``head.fc.``) for the ``*_deit3-*`` configs
  (``layout='official_deit'``), e.g. ``--cfg-options load_from=DST`` or the fine-tune's ``init_cfg``.

The architecture, including the SwiGLU width, is read from the weights and printed. The source is read without
running any of its code (``mmcausal.utils.extract_checkpoint_data``); full training checkpoints also hold the
optimizer state (and the deit ones a pickled ``args``), of which only the weights are taken.
"""
from mmcausal.converters import convert_visionllama_mae, converter_main, describe_visionllama_mae, format_architecture
from mmcausal.converters.vision_llama_deit import (
    convert_visionllama_deit,
    describe_visionllama_deit,
    format_deit_architecture,
)


def is_deit_format(state_dict: dict) -> bool:
    """Whether the weights are the supervised deit model's (``blocks.*``) rather than the MAE model's."""
    return any(key.startswith('blocks.') for key in state_dict)


def convert(state_dict: dict) -> dict:
    """The converter of the format the keys show."""
    return convert_visionllama_deit(state_dict) if is_deit_format(state_dict) else convert_visionllama_mae(state_dict)


def describe(state_dict: dict) -> tuple:
    """(architecture read from the converted weights, its printable summary)."""
    # only the deit model has LayerScale (an mmpretrain-format classifier has a head too)
    if 'backbone.layers.0.ls1.weight' in state_dict:
        info = describe_visionllama_deit(state_dict)
        return dict(info, format='deit'), format_deit_architecture(info)
    info = describe_visionllama_mae(state_dict)
    return info, format_architecture(info)


if __name__ == '__main__':
    converter_main('visionllama2mmcausal', __doc__,
                   'official VisionLLaMA checkpoint (MAE mmengine .pth or supervised deit checkpoint.pth)',
                   convert, describe)
