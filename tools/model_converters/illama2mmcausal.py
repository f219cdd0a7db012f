"""Convert an official iLLaMA checkpoint into an mmcausal (mmpretrain ``ImageClassifier``) checkpoint.

    python tools/model_converters/illama2mmcausal.py illama_base.pth checkpoints/illama-base_in1k.pth

The source may be flat or wrapped under ``model``. It is read with ``torch.load(weights_only=True)``;
official *training* checkpoints also pickle an ``argparse.Namespace`` and are refused unless you pass
``--trust`` (only for files whose origin you trust: unpickling can run arbitrary code).
"""
from mmcausal.converters import convert_illama, converter_main

if __name__ == '__main__':
    converter_main('illama2mmcausal', __doc__, 'official iLLaMA checkpoint (.pth)', convert_illama)
