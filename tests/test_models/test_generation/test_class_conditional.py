"""ClassConditionalDiffusion: the generative model the runner trains and samples. Its loss falls under
both objectives through ``train_step``; uint8 BGR images reach it in [-1, 1] RGB; samples are uint8, follow
``test_cfg`` and depend on each sample's index and label only (not on the batch it is in); wrong combinations of
parts fail at build time with a message."""
import copy

import numpy as np
import pytest
import torch
from mmengine.optim import OptimWrapper
from mmpretrain.structures import DataSample

from mmcausal.models.generation import ClassConditionalDiffusion
from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError

pytestmark = pytest.mark.usefixtures('single_thread')

NETWORK = dict(type='DiffusionTransformer', arch=dict(embed_dims=32, num_layers=2, num_heads=2), patch_size=2,
               in_channels=3, input_size=8, num_classes=4)
DDPM = dict(type='GaussianDiffusion')
INTERPOLANT = dict(type='LinearInterpolant')
FAST_SAMPLING = {'ddpm': dict(sampler='ddpm', num_steps=4), 'interpolant': dict(sampler='sde', num_steps=4)}


def build(objective: dict = DDPM, seed: int = 0, **kwargs) -> ClassConditionalDiffusion:
    torch.manual_seed(seed)
    name = 'ddpm' if objective['type'] == 'GaussianDiffusion' else 'interpolant'
    kwargs.setdefault('test_cfg', FAST_SAMPLING[name])
    return MODELS.build(dict(type='ClassConditionalDiffusion', network=NETWORK, objective=objective, **kwargs))


def randomise(model: ClassConditionalDiffusion, seed: int = 1) -> ClassConditionalDiffusion:
    """Random weights everywhere (the adaLN-Zero init makes the network output 0)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for param in model.network.parameters():
            param.normal_(0, 0.2)
    return model.eval()


def samples(labels, indices=None):
    indices = range(len(labels)) if indices is None else indices
    return [DataSample(metainfo=dict(sample_idx=index)).set_gt_label(label) for label, index in zip(labels, indices)]


def image_batch(n: int = 8, seed: int = 0) -> dict:
    """uint8 BGR images (as LoadImageFromFile gives them) whose class sets a left-right ramp's direction."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 4
    ramp = np.linspace(0, 255, 8)
    images = []
    for label in labels:
        image = np.broadcast_to(ramp if label % 2 else ramp[::-1], (3, 8, 8)) * (0.4 + 0.2 * label // 2)
        images.append(torch.from_numpy((image + rng.normal(0, 8, image.shape)).clip(0, 255).astype(np.uint8)))
    return dict(inputs=images, data_samples=samples(labels.tolist()))


@pytest.mark.parametrize('objective,logged', [(DDPM, {'loss', 'mse', 'vb'}), (INTERPOLANT, {'loss'})],
                         ids=['ddpm-hybrid', 'interpolant'])
def test_a_few_train_steps_reduce_the_loss(objective, logged):
    model = build(objective)
    wrapper = OptimWrapper(torch.optim.AdamW(model.parameters(), lr=3e-3))
    data = image_batch()
    losses = []
    for _ in range(25):
        state = torch.get_rng_state()
        log = model.train_step(copy.deepcopy(data), wrapper)
        torch.set_rng_state(state)  # the same t, noise and label dropout every step: a fixed regression problem
        losses.append(log['loss'].item())
    assert set(log) == logged
    assert losses[-1] < 0.6 * losses[0]


def test_images_reach_the_network_as_rgb_in_minus_one_one():
    model = build()
    bgr = torch.tensor([0, 128, 255], dtype=torch.uint8).view(3, 1, 1).expand(3, 2, 2).clone()
    out = model.data_preprocessor(dict(inputs=[bgr], data_samples=samples([0])), training=True)['inputs']
    expected = torch.tensor([255., 128., 0.]).view(1, 3, 1, 1) / 127.5 - 1
    torch.testing.assert_close(out, expected.expand(1, 3, 2, 2))


def test_loss_encodes_the_inputs_with_the_frozen_autoencoder():
    """A tiny autoencoder (4 latent channels, f = 4) in front of a 4-channel network: the loss runs on its latents and
    trains the network only (no parameter may wait for a gradient under DDP)."""
    model = MODELS.build(dict(type='ClassConditionalDiffusion', network=dict(NETWORK, in_channels=4, input_size=4),
                              objective=DDPM, autoencoder=dict(type='TinyAutoencoder')))
    seen = []
    model.network.register_forward_pre_hook(lambda module, args: seen.append(args[0].shape))
    data = model.data_preprocessor(dict(inputs=[torch.zeros(3, 16, 16, dtype=torch.uint8)] * 2,
                                        data_samples=samples([0, 1])), training=True)
    model(**data, mode='loss')['loss'].backward()
    assert seen == [(2, 4, 4, 4)]
    assert not any(param.requires_grad or param.grad is not None for param in model.autoencoder.parameters())
    assert all(param.grad is not None for param in model.network.parameters())


@pytest.mark.parametrize('objective', [DDPM, INTERPOLANT], ids=['ddpm', 'interpolant'])
def test_samples_depend_on_sample_index_not_on_the_batch(objective):
    model = randomise(build(objective, test_cfg=dict(FAST_SAMPLING['ddpm' if objective is DDPM else 'interpolant'],
                                                      cfg_scale=2., seed=7)))
    labels, indices = [0, 3, 1, 3], [5, 9, 2, 11]
    together = model.predict(None, samples(labels, indices))
    alone = [model.predict(None, samples([label], [index]))[0] for label, index in zip(labels, indices)]
    for one, other in zip(together, alone):
        assert one.pred_img.dtype == torch.uint8 and one.pred_img.shape == (3, 8, 8)
        assert (one.pred_img.int() - other.pred_img.int()).abs().max() <= 1  # float reductions vary with the batch
    latents = model(data_samples=samples(labels, indices), mode='tensor')
    torch.testing.assert_close(model(data_samples=samples(labels[1:2], indices[1:2]), mode='tensor'), latents[1:2],
                               rtol=1e-4, atol=1e-4)  # batched float reductions
    # the same label at another index is another sample; another seed gives other samples
    assert not torch.allclose(latents[1], latents[3], atol=1e-2)
    model.test_cfg['seed'] = 8
    assert not torch.allclose(model(data_samples=samples(labels, indices), mode='tensor'), latents, atol=1e-2)


def test_test_cfg_sets_the_sampler_guidance_and_size():
    model = randomise(build(test_cfg=dict(sampler='ddim', num_steps=3, latent_size=(8, 12))))
    data = samples([1, 2])
    plain = model(data_samples=data, mode='tensor')
    assert plain.shape == (2, 3, 8, 12)
    torch.manual_seed(0)
    again = model(data_samples=data, mode='tensor')
    torch.testing.assert_close(again, plain)  # DDIM with eta 0: only the seeded start noise, not the global RNG
    model.test_cfg.update(cfg_scale=3.)
    all_channels = model(data_samples=data, mode='tensor')
    model.test_cfg.update(cfg_channels=2)
    two_channels = model(data_samples=data, mode='tensor')
    assert not torch.allclose(all_channels, plain, atol=1e-3)
    assert not torch.allclose(two_channels, all_channels, atol=1e-3)
    assert not torch.allclose(two_channels, plain, atol=1e-3)


def test_uint8_conversion_is_the_official_rounding():
    values = torch.tensor([-1.5, -1., -0.5, 0., 0.999, 1., 1.5])
    expected = torch.tensor([0, 0, 64, 128, 255, 255, 255], dtype=torch.uint8)  # clamp(127.5 x + 128) truncated
    assert torch.equal(ClassConditionalDiffusion.to_uint8(values), expected)


@pytest.mark.parametrize('kwargs,message', [
    (dict(autoencoder=dict(type='TinyAutoencoder')), 'in_channels=3'),
    (dict(objective=dict(type='GaussianDiffusion', learn_sigma=False)), 'learn_sigma'),
    (dict(test_cfg=dict(cfg_channels=4)), 'cfg_channels'),
    (dict(objective=INTERPOLANT, test_cfg=dict(sampler='sde', eta=0.5)), 'test_cfg has eta, which LinearInterpolant'),
])
def test_mismatched_parts_are_refused_at_build_time(kwargs, message):
    cfg = dict(type='ClassConditionalDiffusion', network=NETWORK, objective=DDPM)
    with pytest.raises(UserInputError, match=message):
        MODELS.build(dict(cfg, **kwargs))


def test_sampling_needs_each_samples_index():
    model = build()
    with pytest.raises(UserInputError, match='sample_idx'):
        model.predict(None, [DataSample().set_gt_label(1)])
