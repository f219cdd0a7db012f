"""Sample a trained class-conditional generator (DiT-LLaMA, SiT-LLaMA, ...) into a PNG folder and an ADM ``.npz``.

    python tools/generation/sample.py CONFIG CHECKPOINT --num-samples N --out DIR [--cfg-scale S]
        [--cfg-channels C|all] [--seed K] [--sampler ddpm|ddim|ode|sde] [--steps N] [--batch-size B]
        [--vae-decoder VAE_DIR] [--cfg-options KEY=VALUE ...]
    torchrun --nproc-per-node G tools/generation/sample.py ...   (G processes share the samples)

Writes ``DIR/000000.png``, ... and ``DIR/samples.npz`` (``arr_0``: uint8 N x H x W x 3, ``arr_1``: the labels), the
layout the ADM evaluator and ``tools/generation/evaluate.py`` read. Labels are balanced (sample ``i`` has class
``i mod num_classes``) and sample ``i``'s noise comes from ``seed + i``, so the files do not depend on the batch size
or the number of processes. Run the same command again to finish an interrupted run (existing PNGs are kept).
The sampler settings default to the config's ``model.test_cfg`` (the official presets); the options above override
them. The checkpoint's ``state_dict`` is what is sampled: the EMA weights for checkpoints of mmcausal training runs
and converted official files.
"""
import argparse
import os
import time

import torch
from mmengine.config import DictAction
from mmengine.dist import barrier, get_dist_info, init_dist

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis.inputs import build_model
from mmcausal.apis.generation import balanced_labels, sample_to_folder, write_npz
from mmcausal.utils.cli import read_config, user_errors_end_in_one_line
from mmcausal.utils.validation import ConfigValueError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--num-samples', type=int, required=True)
    parser.add_argument('--out', required=True, help='folder of the PNGs and samples.npz')
    parser.add_argument('--cfg-scale', type=float, help='classifier-free guidance scale (1 = none)')
    parser.add_argument('--cfg-channels', help="guided channels: an int (3 = official DiT / SiT) or 'all'")
    parser.add_argument('--seed', type=int, help='sample i draws its noise from seed + i')
    parser.add_argument('--sampler', choices=('ddpm', 'ddim', 'ode', 'sde'))
    parser.add_argument('--steps', type=int, help='sampling steps (DDPM / DDIM) or time points (ODE / SDE)')
    parser.add_argument('--batch-size', type=int, default=32, help='samples per forward and process')
    parser.add_argument('--vae-decoder', help="local diffusers folder of the VAE that decodes (the config's otherwise)")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings')
    return parser.parse_args(argv)


def sampling_options(args: argparse.Namespace) -> dict:
    """``model.test_cfg`` keys set on the command line."""
    options = dict(cfg_scale=args.cfg_scale, seed=args.seed, sampler=args.sampler, num_steps=args.steps)
    if args.cfg_channels is not None:
        if args.cfg_channels != 'all' and not args.cfg_channels.isdigit():
            raise ConfigValueError(f"--cfg-channels must be an int or 'all', got {args.cfg_channels!r}.")
        options['cfg_channels'] = None if args.cfg_channels == 'all' else int(args.cfg_channels)
    return {f'model.test_cfg.{key}': value for key, value in options.items() if value is not None}


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
        init_dist('pytorch', backend='nccl' if torch.cuda.is_available() else 'gloo')
    rank, world_size = get_dist_info()
    device = torch.device(f'cuda:{torch.cuda.current_device()}' if torch.cuda.is_available() else 'cpu')
    with user_errors_end_in_one_line():
        cfg = read_config(args.config, args.cfg_options)
        options = sampling_options(args)
        if args.vae_decoder:
            options.update(vae_option(cfg, args.vae_decoder))
        cfg.merge_from_dict(options)
        model = build_model(cfg, args.checkpoint).to(device)
        start, done = time.time(), [0]

        def progress(count: int) -> None:
            done[0] += count
            print(f'[rank {rank}] {done[0]} samples ({time.time() - start:.0f} s)', flush=True)

        sample_to_folder(model, args.out, args.num_samples, model.network.num_classes, args.batch_size, rank,
                         world_size, progress)
        barrier()
        if rank == 0:
            labels = balanced_labels(args.num_samples, model.network.num_classes)
            print(f'{args.num_samples} samples in {args.out}, arrays in {write_npz(args.out, labels)}')


if __name__ == '__main__':
    main()
