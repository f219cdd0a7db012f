"""The contrastive loss against CLIP's formula, in one process and across two gloo processes."""
import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from clip_ranks import BATCH, loss_and_grads, rank_main, towers_and_inputs
from mmcausal.models.clip import ContrastiveLoss


def global_infonce(images: torch.Tensor, texts: torch.Tensor, scale: float) -> torch.Tensor:
    """CLIP (Radford et al. 2021, Fig. 3): mean of the image->text and text->image cross entropies of the ``N x N``
    cosine-similarity logits, the matching pair on the diagonal."""
    images, texts = F.normalize(images, dim=-1), F.normalize(texts, dim=-1)
    logits = scale * images @ texts.t()
    labels = torch.arange(len(images))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def test_one_process_is_the_formula():
    image_tower, text_tower, images, texts = towers_and_inputs()
    ours = ContrastiveLoss()
    got = loss_and_grads(image_tower, text_tower, images, texts,
                          lambda i, t: ours(F.normalize(i, dim=-1), F.normalize(t, dim=-1), torch.tensor(7.0)))
    want = loss_and_grads(image_tower, text_tower, images, texts, lambda i, t: global_infonce(i, t, 7.0))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_mismatched_features_are_refused():
    with pytest.raises(ValueError, match='pair up'):
        ContrastiveLoss()(torch.randn(3, 4), torch.randn(2, 4), torch.tensor(1.0))


@pytest.mark.e2e
def test_two_gloo_processes_give_the_loss_of_the_concatenated_batch(tmp_path):
    """Negatives span the global batch: two processes of ``BATCH`` pairs, averaged, equal one process of
    ``2 * BATCH`` pairs, in value and in the towers' gradients."""
    out = str(tmp_path / 'rank0.pt')
    mp.start_processes(rank_main, args=(str(tmp_path / 'init'), out), nprocs=2, join=True, start_method='spawn')
    distributed = torch.load(out)
    image_tower, text_tower, images, texts = towers_and_inputs()
    loss, image_grad, text_grad = loss_and_grads(image_tower, text_tower, images, texts,
                                                  lambda i, t: global_infonce(i, t, 7.0))
    torch.testing.assert_close(distributed['loss'], loss)
    torch.testing.assert_close(distributed['image_grad'], image_grad)
    torch.testing.assert_close(distributed['text_grad'], text_grad)
    # a process alone (its own batch as negatives) gives another loss: the test can tell the two apart
    alone = global_infonce((images @ image_tower)[:BATCH], (texts @ text_tower)[:BATCH], 7.0)
    assert not torch.allclose(alone, loss)
