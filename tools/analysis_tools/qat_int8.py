"""A quantization-aware-trained classifier, fake-quantized and converted to int8, side by side on the CPU.

    python tools/analysis_tools/qat_int8.py CONFIG CHECKPOINT [--batches N] [--rounds R] [--threads T]
        [--cfg-options k=v ...]

CONFIG: a config with ``model.backbone.qat`` (e.g. ``illama-tiny-p16_qat-w8a8_32xb128_in1k.py``); CHECKPOINT: its
QAT checkpoint (learned step sizes included), loaded strictly. The model runs as trained, fake-quantized, and after
:func:`~mmcausal.models.illama.convert_to_int8` (int8 weights and inputs, int8 GEMMs), on the first ``--batches``
batches of the config's val dataloader (all by default). Printed: top-1 of each, the share of images on which their
predictions agree, the largest ``|logit difference|``, the size of each state dict as ``torch.save`` writes it (MiB)
and the median CPU latency per batch, over ``--rounds`` rounds that alternate the two models batch by batch, on
``--threads`` threads (1 by default).
"""
import argparse
import copy
import io
import statistics
import time
from typing import Dict, List, Optional, Tuple

import torch
from mmengine.config import DictAction
from mmengine.logging import MMLogger
from torch import Tensor, nn

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis import AnalysisError
from mmcausal.analysis.calibration import check_classifier, labelled_batches
from mmcausal.analysis.inputs import LOGGER, build_model, positive_int
from mmcausal.models.illama import convert_to_int8
from mmcausal.utils.cli import check_checkpoint_argument
from mmcausal.utils.config_reading import read_config
from mmcausal.utils.error_report import user_errors_end_in_one_line

MODELS = ('fake-quantized', 'int8')
Batch = Tuple[Tensor, Tensor]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='a QAT config (model.backbone.qat set)')
    parser.add_argument('checkpoint', help='its QAT checkpoint, with the learned step sizes')
    parser.add_argument('--batches', type=positive_int, help='the first N val batches (default: all of them)')
    parser.add_argument('--rounds', type=positive_int, default=3,
                        help='interleaved timing rounds over the batches (default 3)')
    parser.add_argument('--threads', type=positive_int, default=1, help='CPU threads (default 1)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings, key=value')
    args = parser.parse_args(argv)
    check_checkpoint_argument(parser, args.checkpoint)
    if not MMLogger.check_instance_created(LOGGER):
        MMLogger.get_instance(LOGGER, log_level='WARNING')  # the current logger from now on: no init chatter
    return args


def qat_models(config: str, checkpoint: str, cfg_options: Optional[dict] = None):
    """The config, its fake-quantized classifier with the checkpoint's weights and that classifier in int8."""
    cfg = read_config(config, cfg_options)
    if not cfg.model.get('backbone', {}).get('qat'):
        raise AnalysisError(f'{config} has no model.backbone.qat: give a quantization-aware training config.')
    fake = check_classifier(build_model(cfg, checkpoint))
    try:
        int8 = convert_to_int8(copy.deepcopy(fake))
    except ValueError as error:
        raise AnalysisError(f'{checkpoint} has no learned step sizes ({error}); give a QAT checkpoint.') from error
    return cfg, fake, int8


def size_mib(model: nn.Module) -> float:
    """The size of ``model``'s state dict as ``torch.save`` writes it, in MiB."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes / 2**20


@torch.inference_mode()
def logits(model: nn.Module, batches: List[Batch]) -> Tensor:
    return torch.cat([model(inputs, mode='tensor').float() for inputs, _ in batches])


@torch.inference_mode()
def latencies(models: Dict[str, nn.Module], batches: List[Batch], rounds: int) -> Dict[str, List[float]]:
    """Seconds per batch of each model; each batch runs once per model in turn, after one warm-up pass each."""
    for model in models.values():
        model(batches[0][0], mode='tensor')
    times = {name: [] for name in models}
    for _ in range(rounds):
        for inputs, _ in batches:
            for name, model in models.items():
                start = time.perf_counter()
                model(inputs, mode='tensor')
                times[name].append(time.perf_counter() - start)
    return times


def report(models: Dict[str, nn.Module], batches: List[Batch], rounds: int, threads: int) -> str:
    """The comparison as printed: a table of the two models, then agreement and logit difference."""
    labels = torch.cat([label for _, label in batches])
    outputs = {name: logits(model, batches) for name, model in models.items()}
    predictions = {name: out.argmax(-1) for name, out in outputs.items()}
    times = latencies(models, batches, rounds)
    sizes = [len(inputs) for inputs, _ in batches]
    lines = ['| model | images | top-1 (%) | state dict (MiB) | CPU latency per batch (ms) |',
             '|---|---|---|---|---|']
    for name, model in models.items():
        top1 = 100 * (predictions[name] == labels).double().mean().item()
        lines.append(f'| {name} | {len(labels)} | {top1:.2f} | {size_mib(model):.2f} | '
                     f'{1e3 * statistics.median(times[name]):.2f} |')
    fake, int8 = (predictions[name] for name in MODELS)
    agree = int((fake == int8).sum())
    diff = (outputs[MODELS[0]] - outputs[MODELS[1]]).abs().max().item()
    lines += [f'prediction agreement: {100 * agree / len(labels):.2f} % ({agree} / {len(labels)} images)',
              f'max |logit diff|: {diff:.3g}',
              f'latency: median of {rounds} interleaved rounds x {len(batches)} batches of {max(sizes)} images, '
              f'{threads} thread(s), torch {torch.__version__}']
    return '\n'.join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    with user_errors_end_in_one_line():
        cfg, fake, int8 = qat_models(args.config, args.checkpoint, args.cfg_options)
        threads = torch.get_num_threads()
        torch.set_num_threads(args.threads)
        try:
            batches = []
            for batch in labelled_batches(fake, cfg):
                batches.append(batch)
                if len(batches) == args.batches:
                    break
            if not batches:
                raise AnalysisError('The val dataloader gave no images.')
            printed = report(dict(zip(MODELS, (fake, int8))), batches, args.rounds, args.threads)
        finally:
            torch.set_num_threads(threads)
    print(printed)


if __name__ == '__main__':
    main()
