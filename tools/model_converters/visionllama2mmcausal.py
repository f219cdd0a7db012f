"""Convert an official VisionLLaMA MAE checkpoint (mmengine format) into an mmcausal checkpoint.

    python tools/model_converters/visionllama2mmcausal.py epoch_800.pth \\
        checkpoints/vision-llama-base-p16_mae-800e_in1k.pth

The output keeps the ``backbone.`` / ``neck.`` / ``head.`` prefixes: fine-tuning configs load it with
``init_cfg=dict(type='Pretrained', checkpoint=DST, prefix='backbone.')`` on a
``VisionLLaMA(layout='official_mae', rope_mode='2d', with_cls_token=False)`` backbone, and the MAE
pre-training config can resume from it (the decoder keeps mmpretrain's names). The encoder architecture,
including the SwiGLU width, is read from the weights and printed.

The source is read without running any of its code (``mmcausal.utils.extract_checkpoint_data``); full
mmengine training checkpoints also hold the message hub and optimizer state, of which only the weights
are taken.
"""
from mmcausal.converters import convert_visionllama_mae, converter_main, describe_visionllama_mae, format_architecture


def describe(state_dict: dict) -> tuple:
    """(architecture read from the weights, its printable summary)."""
    info = describe_visionllama_mae(state_dict)
    return info, format_architecture(info)


if __name__ == '__main__':
    converter_main('visionllama2mmcausal', __doc__, 'official VisionLLaMA MAE checkpoint (mmengine .pth)',
                   convert_visionllama_mae, describe)
