"""The two processes of the contrastive loss's gloo test (tests/test_models/test_clip/test_loss.py): a module of its
own, so that spawned processes can import it."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from mmcausal.models.clip import ContrastiveLoss

BATCH, DIM, FEATURES = 6, 5, 8


def towers_and_inputs():
    """Two linear 'towers' and ``2 * BATCH`` image / text inputs, the same in every process."""
    generator = torch.Generator().manual_seed(0)
    image_tower = torch.randn(FEATURES, DIM, generator=generator)
    text_tower = torch.randn(FEATURES, DIM, generator=generator)
    return (image_tower, text_tower, torch.randn(2 * BATCH, FEATURES, generator=generator),
            torch.randn(2 * BATCH, FEATURES, generator=generator))


def loss_and_grads(image_tower, text_tower, images, texts, loss_fn):
    image_tower, text_tower = image_tower.clone().requires_grad_(), text_tower.clone().requires_grad_()
    loss = loss_fn(images @ image_tower, texts @ text_tower)
    loss.backward()
    return loss.detach(), image_tower.grad, text_tower.grad


def rank_main(rank: int, init_file: str, out: str) -> None:
    dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank, world_size=2)
    image_tower, text_tower, images, texts = towers_and_inputs()
    local = slice(rank * BATCH, (rank + 1) * BATCH)
    ours = ContrastiveLoss()
    loss, image_grad, text_grad = loss_and_grads(
        image_tower, text_tower, images[local], texts[local],
        lambda i, t: ours(F.normalize(i, dim=-1), F.normalize(t, dim=-1), torch.tensor(7.0)))
    for tensor in (loss, image_grad, text_grad):  # what DDP does to the gradients: the mean over processes
        dist.all_reduce(tensor)
        tensor /= 2
    if rank == 0:
        torch.save(dict(loss=loss, image_grad=image_grad, text_grad=text_grad), out)
    dist.destroy_process_group()
