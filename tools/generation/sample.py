"""Sample a trained class-conditional generator (DiT-LLaMA, SiT-LLaMA, ...) into a PNG folder and an ADM ``.npz``,
or into one labelled grid.

    python tools/generation/sample.py CONFIG CHECKPOINT --num-samples N --out DIR [--cfg-scale S]
        [--cfg-channels C|all] [--seed K] [--label-rule random|balanced] [--sampler ddpm|ddim|ode|sde] [--steps N]
        [--batch-size B] [--vae-decoder VAE_DIR] [--cfg-options KEY=VALUE ...]
    torchrun --nproc-per-node G tools/generation/sample.py ...   (G processes share the samples)
    python tools/generation/sample.py CONFIG CHECKPOINT --grid --out GRID.png [--labels L ...]
        [--samples-per-label C] [sampling options as above]

Writes ``DIR/000000.png``, ... and ``DIR/samples.npz`` (``arr_0``: uint8 N x H x W x 3, ``arr_1``: the labels), the
layout the ADM evaluator and ``tools/generation/evaluate.py`` read. The labels follow ``model.test_cfg.label_rule``
(``--label-rule``): ``random``, each drawn uniformly as the official ``sample_ddp.py`` does (the ImageNet presets, the
papers' FID-50K), or ``balanced`` (sample ``i`` has class ``i mod num_classes``; the default of configs that do not
say). Sample ``i``'s label and noise are functions of the seed and ``i`` only, so the files do not depend on the batch
size or the number of processes. Run the same command again to finish an interrupted run (existing PNGs are kept).
The sampler settings default to the config's ``model.test_cfg`` (the official presets); the options above override
them. The checkpoint's ``state_dict`` is what is sampled: the EMA weights for checkpoints of mmcausal training runs
and converted official files.

``--grid`` writes one PNG instead: a row of ``--samples-per-label`` samples for each of ``--labels`` (default: the
first 8 classes), each row named on its left by its label and, where the config's training set names its classes, the
class name. Grid sample ``i`` (row by row) draws its noise from ``seed + i``, as ``SampleGridHook`` does in training.
"""
import argparse
import os
import time
from pathlib import Path

import mmengine.dist
import torch
from mmengine.config import DictAction
from mmengine.dist import barrier, get_dist_info
from PIL import Image

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis.inputs import build_model
from mmcausal.apis import config_dataset_meta
from mmcausal.apis.generation import model_sample_labels, sample_to_folder, write_npz
from mmcausal.models.generation.sample_grid import labelled_grid, row_names, sample_grid
from mmcausal.utils.config_reading import read_config
from mmcausal.utils.error_report import user_errors_end_in_one_line
from mmcausal.utils.validation import ConfigValueError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument('--num-samples', type=int, help='samples (labels: --label-rule) as PNGs and samples.npz in --out')
    mode.add_argument('--grid', action='store_true', help='one labelled grid, --out being its .png file')
    parser.add_argument('--out', required=True, help='folder of the PNGs and samples.npz (the .png file with --grid)')
    parser.add_argument('--labels', type=int, nargs='+', help='--grid: the classes of the rows (default: the first 8)')
    parser.add_argument('--samples-per-label', type=int, default=8, help='--grid: the columns')
    parser.add_argument('--cfg-scale', type=float, help='classifier-free guidance scale (1 = none)')
    parser.add_argument('--cfg-channels', help="guided channels: an int (3 = official DiT / SiT) or 'all'")
    parser.add_argument('--seed', type=int, help='sample i draws its noise from seed + i (random labels: from seed)')
    parser.add_argument('--label-rule', choices=('random', 'balanced'),
                        help="--num-samples: 'random' (uniform, the official sample_ddp.py) or 'balanced' "
                             "(i mod num_classes); default: the config's model.test_cfg.label_rule")
    parser.add_argument('--sampler', choices=('ddpm', 'ddim', 'ode', 'sde'),
                        help="SiT configs: 'ode' integrates with dopri5 and 'sde' with Euler-Maruyama (SiT's defaults) "
                             'unless the config sets model.test_cfg.method')
    parser.add_argument('--steps', type=int, help='sampling steps (DDPM / DDIM) or time points (ODE / SDE)')
    parser.add_argument('--batch-size', type=int, default=32, help='samples per forward and process')
    parser.add_argument('--vae-decoder', help="local diffusers folder of the VAE that decodes (the config's otherwise)")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings')
    return parser.parse_args(argv)


def sampling_options(args: argparse.Namespace) -> dict:
    """``model.test_cfg`` keys set on the command line."""
    options = dict(cfg_scale=args.cfg_scale, seed=args.seed, sampler=args.sampler, num_steps=args.steps,
                   label_rule=args.label_rule)
    if args.cfg_channels is not None:
        if args.cfg_channels != 'all' and not args.cfg_channels.isdigit():
            raise ConfigValueError(f"--cfg-channels must be an int or 'all', got {args.cfg_channels!r}.")
        options['cfg_channels'] = None if args.cfg_channels == 'all' else int(args.cfg_channels)
    return {f'model.test_cfg.{key}': value for key, value in options.items() if value is not None}


def check_grid_options(args: argparse.Namespace) -> None:
    """The grid options that need no model: given only with ``--grid``, a ``.png`` file, columns."""
    if not args.grid:
        if args.labels is not None:
            raise ConfigValueError('--labels sets the rows of a grid; add --grid (or leave --labels out).')
    elif args.label_rule is not None:
        raise ConfigValueError('--label-rule sets the labels of --num-samples; a grid has the rows of --labels.')
    elif Path(args.out).suffix.lower() != '.png':
        raise ConfigValueError(f'--grid writes one PNG: give --out a .png file name, not {args.out!r}.')
    elif args.samples_per_label < 1:
        raise ConfigValueError(f'--samples-per-label must be >= 1, got {args.samples_per_label}.')


def grid_labels(args: argparse.Namespace, num_classes: int) -> list:
    """The grid's row labels: ``--labels`` (each a class of the model) or the first 8 classes."""
    labels = args.labels if args.labels is not None else list(range(min(num_classes, 8)))
    wrong = [label for label in labels if not 0 <= label < num_classes]
    if wrong:
        raise ConfigValueError(f'--labels must be classes 0 to {num_classes - 1} of this model, got {wrong}.')
    return labels


def write_grid(model, cfg, args: argparse.Namespace) -> None:
    """Sample the labelled grid of ``--labels`` x ``--samples-per-label`` and save it as ``--out``."""
    labels = grid_labels(args, model.network.num_classes)
    images = sample_grid(model, labels, args.samples_per_label)
    grid = labelled_grid(images, args.samples_per_label, row_names(labels, config_dataset_meta(cfg).get('classes')))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grid).save(args.out)
    print(f'{len(labels)} x {args.samples_per_label} samples in {args.out}')


def vae_option(cfg, folder: str) -> dict:
    """The config key of the SD-VAE folder (the autoencoder's, or its decoder's for stored moments)."""
    autoencoder = cfg.model.get('autoencoder') or {}
    if autoencoder.get('type') == 'SDVAE':
        return {'model.autoencoder.pretrained': folder}
    if (autoencoder.get('decoder') or {}).get('type') == 'SDVAE':
        return {'model.autoencoder.decoder.pretrained': folder}
    raise ConfigValueError(f'--vae-decoder sets an SDVAE folder, but the model of this config decodes with '
                           f'{autoencoder.get("type", "PixelSpace")}; leave it out.')


def main(argv=None) -> None:
    args = parse_args(argv)
    if int(os.environ.get('WORLD_SIZE', '1')) > 1:
        # looked up now, not imported before mmcausal: mmcausal.compat makes it work on hosts without a GPU
        mmengine.dist.init_dist('pytorch', backend='nccl' if torch.cuda.is_available() else 'gloo')
    rank, world_size = get_dist_info()
    device = torch.device(f'cuda:{torch.cuda.current_device()}' if torch.cuda.is_available() else 'cpu')
    with user_errors_end_in_one_line():
        check_grid_options(args)
        cfg = read_config(args.config, args.cfg_options)
        options = sampling_options(args)
        if args.vae_decoder:
            options.update(vae_option(cfg, args.vae_decoder))
        cfg.merge_from_dict(options)
        model = build_model(cfg, args.checkpoint).to(device)
        if args.grid:
            if rank == 0:  # a grid is small: one process samples it
                write_grid(model, cfg, args)
            return
        start, done = time.time(), [0]

        def progress(count: int) -> None:
            done[0] += count
            print(f'[rank {rank}] {done[0]} samples ({time.time() - start:.0f} s)', flush=True)

        labels = model_sample_labels(model, args.num_samples)
        sample_to_folder(model, args.out, labels, args.batch_size, rank, world_size, progress)
        barrier()
        if rank == 0:
            print(f'{args.num_samples} samples in {args.out}, arrays in {write_npz(args.out, labels)}')


if __name__ == '__main__':
    main()
