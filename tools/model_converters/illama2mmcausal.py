"""Convert an official iLLaMA checkpoint into an mmcausal (mmpretrain ``ImageClassifier``) checkpoint.

    python tools/model_converters/illama2mmcausal.py illama_base.pth checkpoints/illama-base_in1k.pth

The source may be flat or wrapped under ``model``. It is read with ``torch.load(weights_only=True)``;
official *training* checkpoints also pickle an ``argparse.Namespace`` and are refused unless you pass
``--trust`` (only for files whose origin you trust: unpickling can run arbitrary code).
"""
import argparse
import sys

from mmcausal.converters import convert_illama, load_source_state_dict, save_checkpoint


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='official iLLaMA checkpoint (.pth)')
    parser.add_argument('dst', help='output mmcausal checkpoint (.pth)')
    parser.add_argument('--trust', action='store_true',
                        help='allow full unpickling of SRC (only for files from a source you trust)')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    try:
        state_dict = convert_illama(load_source_state_dict(args.src, trust=args.trust))
    except (OSError, RuntimeError, ValueError, KeyError) as error:
        sys.exit(f'illama2mmcausal: {error}')
    save_checkpoint(state_dict, args.dst, meta=dict(converted_from=args.src, converter='illama2mmcausal'))
    print(f'Saved {len(state_dict)} tensors to {args.dst}')


if __name__ == '__main__':
    main()
