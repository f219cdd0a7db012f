"""The interface a generative model composes: a DiffusionTransformer bound to its
labels as ``model_fn(x, t)`` trains under either objective (the loss falls on a fixed batch) and samples with
guidance through the same call."""
import pytest
import torch

from mmcausal.models import DiffusionTransformer
from mmcausal.models.generation import GaussianDiffusion, LinearInterpolant

pytestmark = pytest.mark.usefixtures('single_thread')


@pytest.mark.parametrize('objective,sampling', [
    (GaussianDiffusion(), dict(sampler='ddpm', num_steps=5)),
    (LinearInterpolant(), dict(sampler='sde', num_steps=5)),
], ids=['ddpm-hybrid', 'interpolant'])
def test_network_trains_under_the_objective_and_samples_guided(objective, sampling):
    torch.manual_seed(0)
    network = DiffusionTransformer(dict(embed_dims=32, num_layers=2, num_heads=2), patch_size=2, input_size=8,
                                   num_classes=4)
    optimizer = torch.optim.AdamW(network.parameters(), lr=3e-3)
    data = torch.randn(16, 4, 8, 8) * 0.3 + torch.linspace(-1, 1, 8).view(1, 1, 1, 8)
    labels = torch.arange(16) % 4
    losses = []
    for _ in range(30):
        generator_state = torch.get_rng_state()
        loss = objective.loss(lambda x, t: network(x, t, labels), data)['loss'].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        torch.set_rng_state(generator_state)  # the same t and noise every step: a fixed regression problem
    assert losses[-1] < 0.6 * losses[0]
    network.eval()
    with torch.no_grad():
        samples = objective.sample(lambda x, t: network.forward_with_cfg(x, t, labels[:4], 2., cfg_channels=None),
                                   torch.randn(4, 4, 8, 8), **sampling)
    assert samples.shape == (4, 4, 8, 8) and torch.isfinite(samples).all()
