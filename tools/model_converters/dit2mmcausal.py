"""Convert a DiT, SiT, DiT-LLaMA or SiT-LLaMA checkpoint into an mmcausal checkpoint.

    python tools/model_converters/dit2mmcausal.py [--use ema|model] SRC DST

SRC is a released flat EMA file (DiT's ``DiT-XL-2-256x256.pt``, SiT's ``SiT-XL-2-256x256.pt``) or a ``train.py`` file
(``{'model', 'ema', 'opt', 'args'}``, e.g. the DiT-LLaMA ``0400000.pt`` files): its EMA weights by default,
``--use model`` for the live ones. DST is the mmcausal checkpoint to write (the generation configs' default names
come with those configs).

The block type (DiT's GELU MLP or VisionLLaMA's SwiGLU), width, depth, patch size, latent channels, learn_sigma and
the training grid are read from the weights and printed with the network to build. The weights are stored under
``network.`` (a generative model's ``network``; a bare network loads them with ``prefix='network.'``). The source is
read without running any of its code (its ``args`` namespace stays inert data); ``opt`` is ignored.
"""
import argparse
from typing import Dict, Tuple

from torch import Tensor

from mmcausal.converters import convert_dit, converter_main, describe_dit
from mmcausal.converters.dit import source_tokens

_SOURCE: dict = {}  # what describe needs from the source (the pos_embed length), filled by convert


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--use', dest='source_key', choices=('ema', 'model'), default='ema',
                        help='which weights of a train.py file to convert (default: ema; a flat file holds ema)')
    parser.set_defaults(flat_key='ema')


def convert(state_dict: Dict[str, Tensor], args: argparse.Namespace) -> Dict[str, Tensor]:
    _SOURCE['num_tokens'] = source_tokens(state_dict)
    return convert_dit(state_dict)


def describe(converted: Dict[str, Tensor]) -> Tuple[dict, str]:
    return describe_dit(converted, _SOURCE.get('num_tokens'))


if __name__ == '__main__':
    converter_main('dit2mmcausal', __doc__, 'DiT / SiT / DiT-LLaMA / SiT-LLaMA checkpoint (.pt)', convert,
                   describe=describe, add_options=add_options)
