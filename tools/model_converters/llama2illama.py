"""Initialise an iLLaMA from a LLaMA-2 checkpoint by weight selection (paper App. I, Table 18).

    python tools/model_converters/llama2illama.py LLAMA_CKPT DST --arch tiny|small|base|large \\
        [--layers first|uniform] [--elements uniform|first] [--num-heads N] [--img-size 224] [--seed 0]

LLAMA_CKPT: Meta's ``consolidated.00.pth`` (or its folder, shards merged) or a Hugging Face checkpoint (its folder
of ``*.safetensors`` / ``pytorch_model*.bin``, or one file); the heads come from ``params.json`` / ``config.json``
beside it, else width / 128 (LLaMA-2's head width), or ``--num-heads``. DST: an mmcausal checkpoint of the whole
backbone (``backbone.*``: the selected blocks, the rest a seeded fresh init), for a config's ``Pretrained`` init
with ``prefix='backbone.'``. What is selected, and why: :mod:`mmcausal.converters.llama2illama`.
"""
import argparse
import sys
from typing import List, Optional

from mmcausal.converters.common import save_checkpoint
from mmcausal.converters.llama2illama import (
    ELEMENT_SELECTIONS,
    LAYER_SELECTIONS,
    convert_llama2illama,
    describe_selection,
    read_llama_checkpoint,
)
from mmcausal.models.illama import ILLaMA
from mmcausal.models.layers.attention import MASK_MODES
from mmcausal.utils import UserInputError

PROG = 'llama2illama'
ARCHS = sorted(name for names in ILLaMA.arch_zoo for name in names if len(name) > 1)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', metavar='LLAMA_CKPT', help='LLaMA-2 checkpoint file or folder (Meta or Hugging Face)')
    parser.add_argument('dst', metavar='DST', help='output mmcausal checkpoint (.pth)')
    parser.add_argument('--arch', required=True, choices=ARCHS, help='iLLaMA size to initialise')
    parser.add_argument('--layers', default='first', choices=LAYER_SELECTIONS,
                        help='LLaMA layers for the blocks: the first N (default, App. I) or uniformly spread')
    parser.add_argument('--elements', default='uniform', choices=ELEMENT_SELECTIONS,
                        help='channels, heads, rotary pairs and hidden units: uniformly spread (default) or the first')
    parser.add_argument('--num-heads', type=int, help='LLaMA attention heads (default: params.json / config.json, '
                        'else width / 128)')
    parser.add_argument('--img-size', type=int, default=224, help='the position table\'s image size (default 224)')
    parser.add_argument('--patch-size', type=int, default=16, help='patch size (default 16)')
    parser.add_argument('--mask-mode', default='official', choices=MASK_MODES,
                        help='mask mode recorded with the weights (default: official, that of the ImageNet configs)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the init of the unselected parts (default 0)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    try:
        source = read_llama_checkpoint(args.src, args.num_heads)
        state_dict, plan = convert_llama2illama(source, args.arch, args.layers, args.elements, args.img_size,
                                                args.patch_size, args.mask_mode, args.seed)
    except (OSError, UserInputError) as error:
        sys.exit(f'{PROG}: {error}')
    print(describe_selection(source, plan))
    meta = dict(converted_from=args.src, converter=PROG, arch=args.arch, layer_selection=args.layers,
                element_selection=args.elements, seed=args.seed,
                weight_selection={key: plan[key] for key in ('layers', 'residual', 'heads', 'pairs', 'hidden')})
    save_checkpoint(state_dict, args.dst, meta=meta)
    print(f'Saved {len(state_dict)} tensors to {args.dst}')


if __name__ == '__main__':
    main(sys.argv[1:])
