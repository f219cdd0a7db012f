"""Convert an official VisionLLaMA MAE checkpoint (mmengine format) into an mmcausal checkpoint.

    python tools/model_converters/visionllama2mmcausal.py epoch_800.pth checkpoints/vision-llama-base-mae_800e.pth

The output keeps the ``backbone.`` / ``neck.`` / ``head.`` prefixes: fine-tuning configs load it with
``init_cfg=dict(type='Pretrained', checkpoint=DST, prefix='backbone.')`` on a
``VisionLLaMA(layout='official_mae', rope_mode='2d', with_cls_token=False)`` backbone, and the MAE
pre-training config can resume from it (the decoder keeps mmpretrain's names). The encoder architecture,
including the SwiGLU width, is read from the weights and printed.

The source is read with ``torch.load(weights_only=True)``. Full mmengine training checkpoints also pickle
the message hub and optimizer state and are refused unless you pass ``--trust`` (only for files whose
origin you trust: unpickling can run arbitrary code).
"""
import argparse
import sys

from mmcausal.converters import (convert_visionllama_mae, describe_visionllama_mae, format_architecture,
                                 load_source_state_dict, save_checkpoint)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='official VisionLLaMA MAE checkpoint (mmengine .pth)')
    parser.add_argument('dst', help='output mmcausal checkpoint (.pth)')
    parser.add_argument('--trust', action='store_true',
                        help='allow full unpickling of SRC (only for files from a source you trust)')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    try:
        state_dict = convert_visionllama_mae(load_source_state_dict(args.src, trust=args.trust))
    except (OSError, RuntimeError, ValueError, KeyError) as error:
        # KeyError's str() is the repr of its message; show the message itself
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        sys.exit(f'visionllama2mmcausal: {message}')
    info = describe_visionllama_mae(state_dict)
    print(format_architecture(info))
    save_checkpoint(state_dict, args.dst,
                    meta=dict(converted_from=args.src, converter='visionllama2mmcausal', architecture=info))
    print(f'Saved {len(state_dict)} tensors to {args.dst}')


if __name__ == '__main__':
    main()
