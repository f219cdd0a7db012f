"""Convert an official De-focus Mamba checkpoint into an mmcausal checkpoint.

    python tools/model_converters/defocus2mmcausal.py defocus_mamba_base_cls.pth checkpoints/defocus-mamba-base_in1k.pth
    python tools/model_converters/defocus2mmcausal.py --ema --head-rows map22kto1k.txt \\
        defocus_mamba_large_cls_21k.pth checkpoints/defocus-mamba-large_22kto1k.pth
    python tools/model_converters/defocus2mmcausal.py defocus_mamba_base_det_12ep.pth \\
        checkpoints/dino-4scale_defocus-mamba-base_coco-12e.pth

The released files (direct links: configs/defocus/README.md) and the names written here are the configs' defaults.

Classification files: the ``model`` weights, or ``model_ema`` with ``--ema``. ``--head-rows FILE`` (one class index
per line, as the official ``data/map22kto1k.txt``) keeps those rows of the classifiers' last layer, like the
official ``convert_22k_to_1k.py``. Detection files: flat backbone weights, or a whole official DINO detector
(``backbone.``-prefixed), whose simple feature pyramid is mapped onto ours and whose DINO weights keep their
(mmdet) names, so the result loads into configs/defocus/dino-4scale_defocus-mamba-base-*_coco.py. The file's yacs
config is never executed.
"""
import argparse

from mmcausal.converters import convert_defocus, converter_main


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--ema', dest='source_key', action='store_const', const='model_ema',
                        help='convert the EMA weights (model_ema) instead of model')
    parser.add_argument('--head-rows', help='text file of class indices to keep in the classifiers (22k -> 1k)')


def convert(state_dict, args):
    rows = None
    if args.head_rows:
        with open(args.head_rows) as file:
            rows = [int(line) for line in file if line.strip()]
    return convert_defocus(state_dict, rows)


if __name__ == '__main__':
    converter_main('defocus2mmcausal', __doc__, 'official De-focus Mamba checkpoint (.pth)', convert,
                   add_options=add_options)
