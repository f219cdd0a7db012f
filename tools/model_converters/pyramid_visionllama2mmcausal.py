"""Convert an official Pyramid VisionLLaMA checkpoint (deit ``best_checkpoint.pth``) into an mmcausal checkpoint.

    python tools/model_converters/pyramid_visionllama2mmcausal.py best_checkpoint.pth \\
        checkpoints/pyramid-vision-llama-small_in1k.pth

The output is an mmpretrain ``ImageClassifier`` state dict (``backbone.*``, ``head.fc.*``): the ImageNet configs
load it directly, dense configs with ``init_cfg=dict(type='Pretrained', checkpoint=DST, prefix='backbone.')``.
The source is read without running any of its code (its pickled argparse ``args`` stays inert data).
"""
from mmcausal.converters import convert_pyramid_visionllama, converter_main

if __name__ == '__main__':
    converter_main('pyramid_visionllama2mmcausal', __doc__, 'official Pyramid VisionLLaMA checkpoint (deit .pth)',
                   convert_pyramid_visionllama)
