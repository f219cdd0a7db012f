"""Store the SD-VAE posterior moments of every training image and of its horizontal flip, once.

    python tools/generation/extract_latents.py DATA_ROOT OUT_DIR --vae VAE_DIR [--ann-file FILE] [--image-size 256]
        [--batch-size 32] [--num-workers 4] [--device cuda] [--fp16]

DATA_ROOT is an ImageNet-style folder (one sub-folder per class, or the images an --ann-file lists, as mmpretrain's
``CustomDataset`` reads them); each image gets ADM's centre crop (``ADMCenterCrop``, the DiT / SiT training crop) to
``--image-size``, is mapped to [-1, 1] RGB and encoded by the VAE in VAE_DIR (a local diffusers folder of
``stabilityai/sd-vae-ft-ema``; needs ``pip install -r requirements/optional.txt``). OUT_DIR receives ``moments.npy``
(N x 2 x 8 x S/8 x S/8 float16: mean | logvar of the crop and of its flip), ``labels.npy`` and ``progress.json``;
``LatentMomentsDataset`` reads them and ``MomentsLatents`` samples a new latent from them at every step, as the
official training samples the posterior. Interrupted runs resume where they stopped (run the same command again).
``--fp16`` encodes under fp16 autocast as the VisionLLaMA code does (DiT encodes in fp32, the default).
"""
import argparse
import time

import numpy as np
import torch
from mmengine.dataset import pseudo_collate
from mmengine.registry import init_default_scope
from torch.utils.data import DataLoader, Subset

import mmcausal  # noqa: F401  (registers ADMCenterCrop)
from mmcausal.datasets import LatentMomentsStore
from mmcausal.models.generation import SDVAE
from mmcausal.utils.error_report import user_errors_end_in_one_line


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('data_root', help='image folder (class sub-folders, or the images --ann-file lists)')
    parser.add_argument('out_dir', help='where moments.npy, labels.npy and progress.json go')
    parser.add_argument('--vae', required=True, help='local diffusers folder of the VAE (sd-vae-ft-ema)')
    parser.add_argument('--ann-file', default='', help="mmpretrain annotation file ('path label' per line)")
    parser.add_argument('--image-size', type=int, default=256)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--num-workers', type=int, default=4)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--fp16', action='store_true', help='encode under fp16 autocast (the VisionLLaMA code)')
    return parser.parse_args(argv)


def crop_dataset(data_root: str, ann_file: str, image_size: int):
    """The images with ADM's centre crop, packed as mmpretrain packs them (uint8 BGR ``(3, S, S)`` + label)."""
    from mmpretrain.datasets import CustomDataset
    init_default_scope('mmpretrain')
    pipeline = [dict(type='LoadImageFromFile'), dict(type='ADMCenterCrop', size=image_size), dict(type='PackInputs')]
    return CustomDataset(data_root=data_root, ann_file=ann_file, pipeline=pipeline)


def to_model_range(images: list, device: torch.device) -> torch.Tensor:
    """uint8 BGR ``(3, S, S)`` images -> RGB in ``[-1, 1]`` ``(B, 3, S, S)`` (DiT's ToTensor + Normalize(0.5))."""
    return torch.stack(images).to(device).flip(1).float() / 127.5 - 1.


def extract(args: argparse.Namespace) -> LatentMomentsStore:
    dataset = crop_dataset(args.data_root, args.ann_file, args.image_size)
    vae = SDVAE(args.vae)
    device = torch.device(args.device)
    side = args.image_size // vae.downsample
    store = LatentMomentsStore(args.out_dir, np.asarray(dataset.get_gt_labels()), (2 * vae.latent_channels, side, side),
                               info=dict(vae=args.vae, image_size=args.image_size, fp16=args.fp16))
    loader = DataLoader(Subset(dataset, range(store.done, len(dataset))), batch_size=args.batch_size,
                        num_workers=args.num_workers, collate_fn=pseudo_collate)
    start = time.time()
    for batch in loader:
        images = to_model_range(batch['inputs'], device)
        with torch.autocast(device.type, dtype=torch.float16, enabled=args.fp16):
            moments = vae.encode_moments(torch.cat((images, images.flip(3))))
        crop, flip = moments.float().cpu().chunk(2)
        store.append(torch.stack((crop, flip), dim=1).numpy())
        print(f'{store.done}/{len(dataset)} images ({time.time() - start:.0f} s)', flush=True)
    return store


def main(argv=None) -> None:
    args = parse_args(argv)
    with user_errors_end_in_one_line():
        store = extract(args)
    print(f'Moments of {store.done} images (and their flips) in {args.out_dir}')


if __name__ == '__main__':
    main()
