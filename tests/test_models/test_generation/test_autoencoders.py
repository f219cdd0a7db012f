"""The latent spaces of the generative model: pixels, the SD-VAE (diffusers, optional, loaded from a
local folder on first use; here a stand-in module replaces diffusers, which the tests never import), stored posterior
moments sampled again at every encode, and the twin's tiny autoencoder."""
import sys

import pytest
import torch
from torch import nn

import fake_diffusers
from fake_diffusers import FakeAutoencoderKL
from mmcausal.models.generation import SDVAE, AutoencoderReconstruction, PixelSpace, TinyAutoencoder
from mmcausal.models.generation.autoencoders import sample_posterior
from mmcausal.models.generation.transport import MissingOptionalDependency
from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError

pytestmark = pytest.mark.usefixtures('single_thread')


@pytest.fixture
def vae_dir(tmp_path, monkeypatch):
    (tmp_path / 'config.json').write_text('{}')
    fake_diffusers.install(monkeypatch)
    return tmp_path


def test_pixel_space_is_the_identity():
    x = torch.randn(2, 3, 4, 4)
    space = PixelSpace()
    assert space.encode(x) is x and space.decode(x) is x and (space.latent_channels, space.downsample) == (3, 1)


def test_posterior_samples_have_the_stored_mean_and_variance():
    mean, logvar = torch.tensor([1.5, -2.]), torch.tensor([0., -40.])  # the second is clamped to -30
    moments = torch.cat((mean, logvar)).view(1, 4, 1, 1).expand(20000, 4, 1, 1)
    torch.manual_seed(0)
    draws = sample_posterior(moments)[:, :, 0, 0]
    torch.testing.assert_close(draws.mean(0), mean, atol=0.03, rtol=0)
    torch.testing.assert_close(draws.std(0), torch.tensor([1., 3.06e-7]), atol=0.02, rtol=0.01)
    assert torch.equal(sample_posterior(moments[:2], 'mean')[:, :, 0, 0], mean.expand(2, 2))


def test_building_the_sd_vae_needs_neither_diffusers_nor_its_files(monkeypatch):
    monkeypatch.setitem(sys.modules, 'diffusers', None)  # any import of diffusers fails
    vae = MODELS.build(dict(type='SDVAE', pretrained='/nowhere/sd-vae-ft-ema'))
    assert (vae.latent_channels, vae.downsample, vae.scale) == (4, 8, 0.18215)
    assert list(vae.state_dict()) == []
    with pytest.raises(UserInputError, match='No diffusers VAE folder at .*/nowhere/sd-vae-ft-ema') as error:
        vae.encode(torch.zeros(1, 3, 16, 16))
    assert '\n' not in str(error.value)


def test_sd_vae_without_diffusers_says_what_to_install(tmp_path, monkeypatch):
    (tmp_path / 'config.json').write_text('{}')
    monkeypatch.setitem(sys.modules, 'diffusers', None)
    with pytest.raises(MissingOptionalDependency, match='requirements/optional.txt'):
        SDVAE(str(tmp_path)).decode(torch.zeros(1, 4, 2, 2))


def test_sd_vae_loads_locally_once_scales_and_stays_out_of_the_state_dict(vae_dir):
    vae = SDVAE(str(vae_dir), encode_mode='mean')
    images = torch.randn(2, 3, 16, 16)
    latents = vae.encode(images)
    pooled = nn.functional.avg_pool2d(images, 8)
    torch.testing.assert_close(latents, 0.18215 * torch.cat((pooled, pooled.mean(1, keepdim=True)), 1))
    torch.testing.assert_close(vae.decode(latents), nn.functional.interpolate(pooled, scale_factor=8.))
    assert FakeAutoencoderKL.loaded_from == [(str(vae_dir), dict(local_files_only=True))]
    assert list(vae.state_dict()) == [] and list(vae.parameters()) == []
    assert not any(p.requires_grad for p in vae.vae.parameters())
    sampled = SDVAE(str(vae_dir)).encode(images)  # 'sample': mean + exp(-1) noise
    assert 0.18215 * 0.2 < (sampled - latents).std() < 0.18215 * 0.6


def test_moment_latents_are_sampled_again_at_every_encode(vae_dir):
    space = MODELS.build(dict(type='MomentsLatents', decoder=dict(type='SDVAE', pretrained=str(vae_dir))))
    moments = torch.cat((torch.full((2, 4, 2, 2), 3.), torch.full((2, 4, 2, 2), -2.)), 1)
    first, second = space.encode(moments), space.encode(moments)
    assert not torch.equal(first, second)
    for latents in (first, second):
        assert ((latents / 0.18215 - 3.).abs() < 6 * torch.exp(torch.tensor(-1.))).all()
    assert FakeAutoencoderKL.loaded_from == []  # training on stored moments never loads the VAE
    torch.testing.assert_close(space.decode(first), nn.functional.interpolate(first[:, :3] / 0.18215,
                                                                              scale_factor=8.))
    with pytest.raises(UserInputError, match='8 channels'):
        space.encode(torch.zeros(1, 4, 2, 2))


def test_tiny_autoencoder_learns_to_reconstruct_and_calibrates_its_scale():
    torch.manual_seed(0)
    ae = TinyAutoencoder()
    assert (ae.latent_channels, ae.downsample) == (4, 4)
    images = torch.rand(16, 3, 16, 16) * 2 - 1
    images = nn.functional.avg_pool2d(images, 3, 1, 1)  # some spatial structure
    assert ae.encode(images).shape == (16, 4, 4, 4) and ae(images).shape == images.shape
    optimizer = torch.optim.Adam(ae.parameters(), lr=3e-3)
    errors = []
    for _ in range(60):
        loss = nn.functional.mse_loss(ae(images), images)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        errors.append(loss.item())
    assert errors[-1] < 0.5 * errors[0]
    with torch.no_grad():
        reconstruction = ae(images)
        scale = ae.calibrate_scale([images[:8], images[8:]])
        assert ae.encode(images).std().item() == pytest.approx(1., rel=1e-4)
        torch.testing.assert_close(ae(images), reconstruction, rtol=1e-4, atol=1e-5)  # decode undoes the scale
    assert ae.state_dict()['scale'].item() == pytest.approx(scale)


# ---- training the tiny autoencoder (the twins' first stage) and loading it into a generator -----------------------

def _blurred_images(num: int = 16, size: int = 16) -> torch.Tensor:
    torch.manual_seed(0)
    return nn.functional.avg_pool2d(torch.rand(num, 3, size, size) * 4 - 2, 3, 1, 1)  # some spatial structure


def test_autoencoder_reconstruction_trains_and_tracks_one_over_the_latent_std():
    model = AutoencoderReconstruction(dict(type='TinyAutoencoder', channels=(8, 16)), scale_momentum=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    images = _blurred_images()
    errors = []
    for _ in range(60):
        loss = model(images, mode='loss')['loss']  # the scale changes every step: backward must still run
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        errors.append(loss.item())
    assert errors[-1] < 0.5 * errors[0]
    with torch.no_grad():
        model.eval()
        unscaled_std = model.autoencoder.encoder(images).std().item()
        # the running estimate trails the last weights by a few steps: within 10 % of 1 / std
        assert model.autoencoder.scale.item() == pytest.approx(1 / unscaled_std, rel=0.1)
        torch.testing.assert_close(model(images), model.autoencoder.decoder(model.autoencoder.encoder(images)))
        scale = model.autoencoder.scale.clone()
        model(images, mode='loss')
        assert torch.equal(model.autoencoder.scale, scale)  # evaluation does not move it


def test_autoencoder_reconstruction_loss_does_not_depend_on_the_scale_it_tracks():
    """A training step decodes with the scale it encoded with: its loss is the MSE of decoder(encoder(x)), however
    far the step moves the scale (here from 1 to 1 / the std of the first batch's latents)."""
    model = AutoencoderReconstruction(dict(type='TinyAutoencoder', channels=(8, 16)), scale_momentum=1.)
    images = _blurred_images()
    loss = model(images, mode='loss')['loss']
    with torch.no_grad():
        expected = torch.nn.functional.mse_loss(model.autoencoder.decoder(model.autoencoder.encoder(images)), images)
    assert model.autoencoder.scale.item() != pytest.approx(1.)  # the step moved the scale
    torch.testing.assert_close(loss, expected)


def test_autoencoder_reconstruction_needs_an_autoencoder_with_a_scale():
    with pytest.raises(UserInputError, match='scale buffer'):
        AutoencoderReconstruction(dict(type='PixelSpace'))


def test_tiny_autoencoder_loads_its_trained_weights_and_scale_in_init_weights(tmp_path):
    trainer = AutoencoderReconstruction(dict(type='TinyAutoencoder', channels=(8, 16)))
    trainer(_blurred_images(), mode='loss')  # sets a scale other than 1
    torch.save(dict(meta=dict(), state_dict=trainer.state_dict()), tmp_path / 'ae.pth')
    generator = MODELS.build(dict(
        type='ClassConditionalDiffusion',
        network=dict(type='DiffusionTransformer', arch=dict(embed_dims=16, num_layers=1, num_heads=2), patch_size=2,
                     in_channels=4, input_size=8, learn_sigma=False, num_classes=4),
        objective=dict(type='GaussianDiffusion', learn_sigma=False),
        autoencoder=dict(type='TinyAutoencoder', channels=(8, 16), checkpoint=str(tmp_path / 'ae.pth'))))
    assert not torch.equal(generator.autoencoder.encoder[0].weight, trainer.autoencoder.encoder[0].weight)
    generator.init_weights()  # what the runner calls when training starts
    for name, value in trainer.autoencoder.state_dict().items():
        assert torch.equal(generator.autoencoder.state_dict()[name], value), name
    assert generator.autoencoder.scale.item() != 1.


def test_tiny_autoencoder_checkpoint_errors_say_what_to_change(tmp_path):
    with pytest.raises(UserInputError, match='does not exist: train the autoencoder config first'):
        TinyAutoencoder(checkpoint=str(tmp_path / 'none.pth')).init_weights()
    torch.save(dict(state_dict=AutoencoderReconstruction(dict(type='TinyAutoencoder')).state_dict()),
               tmp_path / 'wide.pth')
    with pytest.raises(UserInputError, match='no autoencoder of this shape'):
        TinyAutoencoder(channels=(8, 16), checkpoint=str(tmp_path / 'wide.pth')).init_weights()
