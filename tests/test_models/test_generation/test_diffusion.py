"""GaussianDiffusion (DDPM as DiT trains and samples it): schedule tables against their closed
forms, the respaced steps, the hybrid loss against a re-derivation written here, and the DDPM / DDIM samplers on a
Gaussian target whose optimal network is known in closed form."""
import math

import pytest
import torch
from torch.distributions import Normal, kl_divergence

from dispatch_utils import HostTransfers
from mmcausal.models.generation import GaussianDiffusion, classifier_free_guidance
from mmcausal.models.generation.diffusion import space_timesteps
from mmcausal.utils.errors import UserInputError

T = 1000
BETAS = torch.linspace(1e-4, 0.02, T, dtype=torch.float64)  # DDPM's linear schedule, written out
ABAR = torch.cumprod(1 - BETAS, dim=0)
MU, STD = 1.5, 0.5  # the toy data distribution N(MU, STD^2)
KEPT_250 = [round(i * 999 / 249) for i in range(250)]
INDEX_OF_STEP = torch.full((T, ), -1).index_put_((torch.tensor(KEPT_250), ), torch.arange(250))


# ------------------------------------------------------------------------------------------------ schedule


def test_schedule_tables_equal_their_closed_forms():
    s = GaussianDiffusion().schedule
    torch.testing.assert_close(s.betas, BETAS, rtol=1e-12, atol=0)
    for t in (0, 1, 2, 500, 999):
        abar = math.prod(1 - beta for beta in BETAS[:t + 1].tolist())
        abar_prev = math.prod(1 - beta for beta in BETAS[:t].tolist())
        beta = BETAS[t].item()
        assert s.alphas_cumprod[t].item() == pytest.approx(abar, rel=1e-12)
        assert s.alphas_cumprod_prev[t].item() == pytest.approx(abar_prev, rel=1e-12)
        assert s.sqrt_recipm1_alphas_cumprod[t].item() == pytest.approx(math.sqrt(1 / abar - 1), rel=1e-10)
        posterior = beta * (1 - abar_prev) / (1 - abar)
        assert s.posterior_variance[t].item() == pytest.approx(posterior, rel=1e-10, abs=1e-300)
        assert s.posterior_mean_coef1[t].item() == pytest.approx(beta * math.sqrt(abar_prev) / (1 - abar), rel=1e-10)
        assert s.posterior_mean_coef2[t].item() == pytest.approx(
            (1 - abar_prev) * math.sqrt(1 - beta) / (1 - abar), rel=1e-10)
    assert s.posterior_variance[0] == 0
    assert s.posterior_log_variance_clipped[0] == s.posterior_log_variance_clipped[1] == s.posterior_variance[1].log()


def test_respacing_to_250_keeps_the_official_indices_and_the_marginals():
    assert space_timesteps(T, 250) == KEPT_250 == space_timesteps(T, '250')
    assert KEPT_250[:4] == [0, 4, 8, 12] and KEPT_250[-3:] == [991, 995, 999] and len(set(KEPT_250)) == 250
    assert 245 in KEPT_250 and 249 in KEPT_250 and 253 in KEPT_250
    respaced = GaussianDiffusion().schedule.respaced(250)
    assert respaced.timestep_map.tolist() == KEPT_250
    torch.testing.assert_close(respaced.alphas_cumprod, ABAR[KEPT_250], rtol=1e-12, atol=0)
    assert space_timesteps(T, 'ddim50') == list(range(0, 1000, 20))
    assert space_timesteps(100, '10,5') == [0, 5, 11, 16, 22, 27, 33, 38, 44, 49] + [50, 62, 74, 87, 99]


def _iddpm_kept_steps(num_timesteps, count):
    """IDDPM's ``space_timesteps`` for one section, as the official code runs it: the stride added up step by
    step in floating point, each running sum rounded (Python's rounding)."""
    stride, position, kept = (num_timesteps - 1) / (count - 1), 0.0, []
    for _ in range(count):
        kept.append(round(position))
        position += stride
    return kept


def test_respaced_steps_follow_the_official_running_sum_at_every_count():
    assert _iddpm_kept_steps(T, 250) == KEPT_250
    assert _iddpm_kept_steps(T, 21)[10] == 499  # round(10 * 999 / 20) = round(499.5) would keep 500
    for count in range(2, T + 1):
        assert space_timesteps(T, count) == _iddpm_kept_steps(T, count), count
    with pytest.raises(UserInputError, match='Invalid timestep spacing'):
        space_timesteps(T, 'fast')


# ------------------------------------------------------------------------------------------------ hybrid loss


def reference_hybrid_loss(x0, t, noise, eps_hat, v):
    """L_simple + L_vb of DiT's hybrid objective, re-derived from the definitions (Nichol & Dhariwal
    2021, Improved DDPM, Sec. 2-3) in float64."""
    x0, noise, eps_hat, v = (a.double() for a in (x0, noise, eps_hat, v))
    abar = ABAR[t].view(-1, 1)
    abar_prev = torch.where(t > 0, ABAR[(t - 1).clamp(min=0)], torch.ones(())).view(-1, 1)
    beta = BETAS[t].view(-1, 1)
    x_t = abar.sqrt() * x0 + (1 - abar).sqrt() * noise
    mse = ((noise - eps_hat) ** 2).mean(1)
    # posterior q(x_{t-1} | x_t, x0) and the model's Gaussian with x0 predicted from eps_hat
    coef1, coef2 = beta * abar_prev.sqrt() / (1 - abar), (1 - abar_prev) * (1 - beta).sqrt() / (1 - abar)
    tilde = lambda i: BETAS[i] * (1 - ABAR[i - 1]) / (1 - ABAR[i])  # noqa: E731
    tilde_clipped = torch.where(t > 0, tilde(t.clamp(min=1)), tilde(torch.ones_like(t))).view(-1, 1)
    x0_hat = (x_t - (1 - abar).sqrt() * eps_hat) / abar.sqrt()
    log_var = (v + 1) / 2 * beta.log() + (1 - v) / 2 * tilde_clipped.log()
    true = Normal(coef1 * x0 + coef2 * x_t, tilde_clipped.sqrt())
    model = Normal(coef1 * x0_hat + coef2 * x_t, (0.5 * log_var).exp())
    kl = kl_divergence(true, model).mean(1) / math.log(2)
    # t = 0: minus the log-probability of x0's 8-bit bin (exact normal CDF here)
    bin_mass = model.cdf(x0 + 1 / 255) - model.cdf(x0 - 1 / 255)
    nll = -bin_mass.log().mean(1) / math.log(2)
    return mse + torch.where(t == 0, nll, kl), mse


def test_hybrid_loss_equals_the_rederivation_and_trains_eps_by_mse_only():
    generator = torch.Generator().manual_seed(0)
    x0 = torch.rand(6, 5, generator=generator) * 1.6 - 0.8  # inside (-1, 1): the decoder's interior bins
    noise = torch.randn(6, 5, generator=generator)
    t = torch.tensor([0, 1, 2, 250, 700, 999])
    prediction = torch.cat((noise + 0.1 * torch.randn(6, 5, generator=generator),
                            torch.rand(6, 5, generator=generator) * 2 - 1), dim=1).requires_grad_()
    terms = GaussianDiffusion().loss(lambda x, steps: prediction * 1, x0, t=t, noise=noise)
    expected, expected_mse = reference_hybrid_loss(x0, t, noise, prediction[:, :5].detach(), prediction[:, 5:].detach())
    torch.testing.assert_close(terms['mse'].double(), expected_mse, rtol=1e-5, atol=1e-7)
    # fp32 against fp64, and the tanh CDF approximation of the decoder term against the exact CDF at t = 0
    torch.testing.assert_close(terms['loss'][1:].double(), expected[1:], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(terms['loss'][:1].double(), expected[:1], rtol=2e-3, atol=0)
    eps_grad, = torch.autograd.grad(terms['loss'].sum(), prediction)
    torch.testing.assert_close(eps_grad[:, :5], 2 * (prediction[:, :5] - noise).detach() / 5)
    assert eps_grad[:, 5:].abs().min() > 0


def test_without_learned_variance_the_loss_is_the_mse():
    x0 = torch.randn(4, 3)
    terms = GaussianDiffusion(learn_sigma=False).loss(lambda x, t: torch.zeros_like(x), x0)
    assert set(terms) == {'mse', 'loss'} and torch.equal(terms['loss'], terms['mse'])
    with pytest.raises(UserInputError, match='needs 6'):
        GaussianDiffusion().loss(lambda x, t: torch.zeros_like(x), x0)


# ------------------------------------------------------------------------------------------------ samplers


def optimal_eps(x, t):
    """E[eps | x_t] for data N(MU, STD^2): the best epsilon prediction, linear in x_t."""
    abar = ABAR[t].float().view(-1, 1)
    return (1 - abar).sqrt() * (x - abar.sqrt() * MU) / (abar * STD ** 2 + 1 - abar)


def optimal_respaced_prediction(x, t):
    """[eps | v] for 250 respaced steps where v sets the exact reverse variance of the Gaussian target:
    beta~' + coef1'^2 Var[x0 | x_t] (the posterior's variance plus that of the x0 estimate)."""
    index = INDEX_OF_STEP[t]
    abar = ABAR[t]
    abar_prev = torch.where(index > 0, ABAR[torch.tensor(KEPT_250)[(index - 1).clamp(min=0)]], torch.ones(()))
    beta = 1 - abar / abar_prev
    tilde = beta * (1 - abar_prev) / (1 - abar)
    beta_1 = 1 - ABAR[KEPT_250[1]] / ABAR[0]
    tilde_1 = beta_1 * (1 - ABAR[0]) / (1 - ABAR[KEPT_250[1]])
    tilde_clipped = torch.where(index > 0, tilde, tilde_1)
    coef1 = beta * abar_prev.sqrt() / (1 - abar)
    x0_variance = STD ** 2 * (1 - abar) / (abar * STD ** 2 + 1 - abar)
    log_var = (tilde + coef1 ** 2 * x0_variance).log()
    v = 2 * (log_var - tilde_clipped.log()) / (beta.log() - tilde_clipped.log()) - 1
    return torch.cat((optimal_eps(x, t), v.float().view(-1, 1).expand_as(x)), dim=1)


def assert_target_distribution(samples, var_rtol):
    assert samples.mean().item() == pytest.approx(MU, abs=0.01)
    assert samples.var().item() == pytest.approx(STD ** 2, rel=var_rtol)


def test_ddpm_with_the_optimal_network_samples_the_target():
    torch.manual_seed(0)
    samples = GaussianDiffusion().sample(optimal_respaced_prediction, torch.randn(40000, 1), num_steps=250)
    assert_target_distribution(samples, var_rtol=0.02)


def test_ddpm_with_the_fixed_large_variance_samples_the_target():
    torch.manual_seed(0)
    samples = GaussianDiffusion(learn_sigma=False).sample(optimal_eps, torch.randn(40000, 1), num_steps=250)
    assert_target_distribution(samples, var_rtol=0.03)


@pytest.mark.parametrize('num_steps,var_rtol', [(50, 0.15), ('ddim25', 0.25)])
def test_ddim_follows_its_exact_linear_recursion(num_steps, var_rtol):
    """With the optimal (linear) eps, each deterministic DDIM step is x' - a' MU = k (x - a MU) with
    k = (a' a STD^2 + b' b) / (a^2 STD^2 + b^2) (a = sqrt(abar), b = sqrt(1 - abar)): the sampler must reproduce that
    chain's mean and variance exactly (up to Monte-Carlo noise), and its variance approaches STD^2."""
    torch.manual_seed(0)
    noise = torch.randn(40000, 1)
    samples = GaussianDiffusion(learn_sigma=False).sample(optimal_eps, noise, sampler='ddim', num_steps=num_steps)
    kept = space_timesteps(T, num_steps)
    scale, offset = 1., -ABAR[kept[-1]].sqrt().item() * MU  # x_T - a_T MU with E[x_T] = 0
    for step, previous in zip(reversed(kept), list(reversed(kept))[1:] + [None]):
        a, b = ABAR[step].sqrt().item(), (1 - ABAR[step]).sqrt().item()
        a2, b2 = (ABAR[previous].sqrt().item(), (1 - ABAR[previous]).sqrt().item()) if previous is not None \
            else (1., 0.)
        k = (a2 * a * STD ** 2 + b2 * b) / (a * a * STD ** 2 + b * b)
        scale, offset = scale * k, offset * k
    # the last step lands on x0_hat (a' = 1, b' = 0)
    torch.testing.assert_close(samples, MU + offset + scale * noise, rtol=1e-4, atol=1e-4)
    assert samples.var().item() == pytest.approx(STD ** 2, rel=var_rtol)  # few steps: a discretisation error


@pytest.mark.parametrize('eta', [0.5, 1.])
def test_stochastic_ddim_follows_its_exact_affine_recursion(eta):
    """DDIM with eta > 0 and the optimal eps: with u = x - a MU, x0_hat = MU + u a STD^2 / D and eps = b u / D
    (D = a^2 STD^2 + b^2), so a step is u' = k u + sigma z with k = (a' a STD^2 + c b) / D, c = sqrt(b'^2 - sigma^2)
    and sigma = eta sqrt((1 - abar') / (1 - abar)) sqrt(1 - abar / abar'): the samples' mean and variance must be
    that chain's (sampled by the sampler, computed here). (At 50 steps the chain's variance is below STD^2, 0.197 at
    eta = 1: posterior noise leaves out the x0 estimate's uncertainty, which DDPM's learned variance adds.)"""
    torch.manual_seed(0)
    noise = torch.randn(40000, 1)
    samples = GaussianDiffusion(learn_sigma=False).sample(optimal_eps, noise, sampler='ddim', num_steps=50, eta=eta)
    kept = space_timesteps(T, 50)
    mean, variance = -ABAR[kept[-1]].sqrt().item() * MU, 1.  # of u at x_T ~ N(0, 1)
    for step, previous in zip(reversed(kept), list(reversed(kept))[1:] + [None]):
        abar = ABAR[step].item()
        abar_prev = ABAR[previous].item() if previous is not None else 1.
        a, b, a2 = math.sqrt(abar), math.sqrt(1 - abar), math.sqrt(abar_prev)
        sigma = eta * math.sqrt((1 - abar_prev) / (1 - abar) * (1 - abar / abar_prev))
        k = (a2 * a * STD ** 2 + math.sqrt(1 - abar_prev - sigma ** 2) * b) / (abar * STD ** 2 + 1 - abar)
        mean, variance = k * mean, k ** 2 * variance + sigma ** 2
    assert samples.mean().item() == pytest.approx(MU + mean, abs=0.01)
    assert samples.var().item() == pytest.approx(variance, rel=0.03)
    deterministic = GaussianDiffusion(learn_sigma=False).sample(optimal_eps, noise, sampler='ddim', num_steps=50)
    assert (samples - deterministic).abs().mean().item() > 0.1 * eta  # the steps' noise took part


def test_ddpm_steps_draw_their_noise_from_step_noise():
    """A per-sample noise source (what a seeded sampler passes) is what the steps use: the same draws give the same
    samples whatever the batch."""
    def seeded(seed):
        generator = torch.Generator().manual_seed(seed)
        return lambda x: torch.randn(x.shape, generator=generator)

    diffusion = GaussianDiffusion(learn_sigma=False)
    start = torch.randn(1, 1)
    one = diffusion.sample(optimal_eps, start, num_steps=20, step_noise=seeded(5))
    again = diffusion.sample(optimal_eps, start, num_steps=20, step_noise=seeded(5))
    other = diffusion.sample(optimal_eps, start, num_steps=20, step_noise=seeded(6))
    assert torch.equal(one, again) and not torch.equal(one, other)


@pytest.mark.parametrize('num_guided', [3, 4])
def test_guidance_on_three_or_all_channels(num_guided):
    cond = torch.arange(8.).view(1, 8, 1, 1)
    uncond = torch.zeros(1, 8, 1, 1)
    out = classifier_free_guidance(cond, uncond, 1.5, num_guided)
    expected = cond.clone()
    expected[:, :num_guided] *= 1.5
    torch.testing.assert_close(out, expected)


# ------------------------------------------------------------------------------------------------ device copies


def _network_of(channels):
    return lambda x, t: torch.cat((0.1 * x, torch.zeros_like(x)), dim=1)[:, :channels]


@pytest.mark.parametrize('device', ['meta'] + (['cuda'] if torch.cuda.is_available() else []))
@pytest.mark.parametrize('learn_sigma, fixed_variance', [(True, 'large'), (False, 'large'), (False, 'small')])
def test_training_and_sampling_steps_copy_no_schedule_table_to_the_device(device, learn_sigma, fixed_variance):
    """The schedule's CPU float64 tables reach a device once (the first step there); later losses and DDPM / DDIM
    sampling steps copy nothing from the host ('meta' stands in for a GPU on machines without one: a CPU -> meta
    copy dispatches a ``_to_copy`` as a host-to-device copy does)."""
    diffusion = GaussianDiffusion(num_timesteps=100, learn_sigma=learn_sigma, fixed_variance=fixed_variance)
    network = _network_of(8 if learn_sigma else 4)
    x0 = torch.zeros(2, 4, 3, 3, device=device)

    def steps():
        for _ in range(3):
            diffusion.loss(network, x0)
        for sampler in ('ddpm', 'ddim'):
            diffusion.sample(network, x0, sampler=sampler, num_steps=10, step_noise=torch.randn_like)

    with HostTransfers() as first:
        steps()  # the first use on the device makes its copies
    with HostTransfers() as recorder:
        steps()
    assert first.calls and recorder.calls == []
    tables = diffusion.schedule.tables_on(device)
    steps()
    assert diffusion.schedule.tables_on(device) is tables
    assert diffusion.schedule.respaced(10) is diffusion.schedule.respaced(10)


def test_device_tables_are_exact_copies_and_extract_reads_them_as_before():
    """The per-device tables equal the float64 CPU tables bit for bit, and ``extract`` gives what the former
    ``table.to(device)[t].to(dtype)`` gave, also for the 'large' variance (formerly made at every call)."""
    schedule = GaussianDiffusion().schedule
    t = torch.tensor([0, 1, 7, 500, 999])
    assert schedule.tables_on('cpu') is schedule.tables_on(torch.device('cpu'))
    large = torch.cat((schedule.posterior_variance[1:2], schedule.betas[1:])).log()
    assert torch.equal(schedule.large_log_variance, large)
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        like = torch.zeros(5, 2, 2, dtype=dtype)
        for name in schedule.TABLES[:-1]:
            table = getattr(schedule, name)
            assert table.dtype == torch.float64 and schedule.tables_on('cpu')[name] is table
            assert torch.equal(schedule.extract(name, t, like), table[t].to(dtype).view(-1, 1, 1))
