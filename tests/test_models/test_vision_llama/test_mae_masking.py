"""MAEVisionLLaMA: random masking, kept patches keep their grid positions, the official cls bypass."""
import torch

from mmcausal.models.layers import (
    grid_positions,
)
from mmcausal.models.vision_llama import MAEVisionLLaMA, random_masking

TINY = dict(embed_dims=32, num_layers=3, num_heads=2)


# ----------------------------------------------------------------------------------- MAE
def test_random_masking_keeps_the_requested_fraction():
    torch.manual_seed(0)
    ids_keep, mask, ids_restore = random_masking(3, 16, 0.75)
    assert ids_keep.shape == (3, 4) and mask.sum(1).tolist() == [12., 12., 12.]
    assert (mask.gather(1, ids_keep) == 0).all()
    assert (ids_restore.argsort(1)[:, :4] == ids_keep).all()


def test_mae_kept_tokens_keep_their_grid_positions():
    torch.manual_seed(0)
    mae = MAEVisionLLaMA(TINY, img_size=64, patch_size=8, rope_anchor=8, mask_ratio=0.75).eval()
    captured = {}

    def capture(block, args):
        captured['angles'] = args[1].angles  # the TokenLayout the blocks receive

    mae.layers[0].register_forward_pre_hook(capture)
    images = torch.randn(2, 3, 64, 64)
    latent, mask, ids_restore = mae(images)
    assert latent.shape == (2, 1 + 16, 32) and mask.shape == (2, 64)
    ids_keep = ids_restore.argsort(1)[:, :16]
    full_table = mae.rope.angles(grid_positions((8, 8)))
    torch.testing.assert_close(captured['angles'][:, 1:], full_table[ids_keep], rtol=0, atol=0)
    assert (captured['angles'][:, 0] == 0).all(), 'cls token is not rotated'


def test_mae_without_masking_is_a_permutation_of_the_plain_forward():
    """mask_ratio 0 shuffles all tokens; with per-sample positions the result equals the unmasked forward."""
    torch.manual_seed(0)
    mae = MAEVisionLLaMA(TINY, img_size=64, patch_size=8, rope_anchor=8, mask_ratio=0.).eval()
    images = torch.randn(2, 3, 64, 64)
    latent, mask, ids_restore = mae(images)
    plain = mae(images, mask=None)[0]
    unshuffled = latent[:, 1:].gather(1, ids_restore.unsqueeze(-1).expand(-1, -1, latent.shape[-1]))
    torch.testing.assert_close(unshuffled, plain[:, 1:], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(latent[:, 0], plain[:, 0], rtol=1e-4, atol=1e-5)
    assert mask.sum() == 0


def test_mae_official_cls_bypass():
    """cls_through_encoder=False (official code): blocks see the patches only; the raw token is normed."""
    torch.manual_seed(0)
    mae = MAEVisionLLaMA(TINY, img_size=64, patch_size=8, rope_anchor=8, cls_through_encoder=False).eval()
    images = torch.randn(2, 3, 64, 64)
    torch.manual_seed(1)
    latent, _, _ = mae(images)
    torch.testing.assert_close(latent[:, 0], mae.norm(mae.cls_token[0]).expand(2, -1))
    with torch.no_grad():
        mae.cls_token.add_(1.)
    torch.manual_seed(1)
    shifted, _, _ = mae(images)
    torch.testing.assert_close(shifted[:, 1:], latent[:, 1:], rtol=0, atol=0)
