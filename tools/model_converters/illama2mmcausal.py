"""Convert an official iLLaMA checkpoint into an mmcausal (mmpretrain ``ImageClassifier``) checkpoint.

    python tools/model_converters/illama2mmcausal.py mambaout_small.pth checkpoints/illama-base-p16_in1k.pth

The source may be flat or wrapped under ``model``. It is read without running any of its code
(``mmcausal.utils.extract_checkpoint_data``): official *training* checkpoints also pickle an
``argparse.Namespace`` and the optimizer; only the weights are taken.
"""
from mmcausal.converters import convert_illama, converter_main

if __name__ == '__main__':
    converter_main('illama2mmcausal', __doc__, 'official iLLaMA checkpoint (.pth)', convert_illama)
