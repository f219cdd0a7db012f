"""The options of De-focus Mamba's ablations (paper Table 4) against formulas written out here from the paper.

(a) the band-pass filter: the scan's state decay (data-dependent as released, learnable, fixed or none) and fixed
RoPE frequencies; (c) the input of the classification loss (class token, patch mean, both). Each oracle is a
token-by-token recurrence or a plain matrix product; none calls the code it checks.
"""
import pytest
import torch
import torch.nn.functional as F
from mmpretrain.structures import DataSample

from mmcausal.models.defocus import DefocusMamba, DefocusMambaMixer
from mmcausal.models.layers import TokenLayout
from mmcausal.registry import MODELS

DIMS, STATES, RANK = 8, 4, 3  # E = 16, norm groups of 8


def _mixer(decay, rope_learnable=True, **kwargs):
    torch.manual_seed(0)
    mixer = DefocusMambaMixer(DIMS, state_dims=STATES, dt_rank=RANK, norm_group_size=8, decay=decay,
                              rope_learnable=rope_learnable, **kwargs).double()
    with torch.no_grad():  # values away from the init, so a dropped or swapped term shows
        for name, tensor in [*mixer.named_parameters(), *mixer.named_buffers()]:
            if name in ('A_log', 'rope.freq', 'D', 'dt_proj.bias'):
                tensor.add_(0.3 * torch.randn_like(tensor))
    return mixer


def _oracle(mixer, x, decay_rule, position_scale=1., decay_scale=1.):
    """The De-focus Mamba mixer (paper Eq. 9, the released forward) with the state decay ``a_t`` of
    ``decay_rule(delta_t)`` ``(B, E, N)``: h_t = a_t * h_t-1 + delta_t u_t B_t, y_t = <h_t, C_t>."""
    length, inner = x.shape[1], 2 * DIMS
    u, z = (x @ mixer.in_proj.weight.t()).split(inner, dim=-1)
    u = F.silu(F.conv1d(F.pad(u.transpose(1, 2), (3, 0)), mixer.conv1d.weight, mixer.conv1d.bias,
                        groups=inner)).transpose(1, 2)
    dt, B, C = (u @ mixer.x_proj.weight.t()).split([RANK, STATES, STATES], dim=-1)
    if mixer.rope is not None:  # the released "rotate every two", one angle per state dim
        theta = (torch.arange(length, dtype=x.dtype) / position_scale)[:, None] * mixer.rope.freq

        def rotate(v):
            out = v.clone()
            out[..., 0::2] = v[..., 0::2] * theta[:, 0::2].cos() - v[..., 1::2] * theta[:, 0::2].sin()
            out[..., 1::2] = v[..., 1::2] * theta[:, 1::2].cos() + v[..., 0::2] * theta[:, 1::2].sin()
            return out
        B, C = rotate(B), rotate(C)
    delta = torch.log1p(torch.exp(dt @ mixer.dt_proj.weight.t() + mixer.dt_proj.bias)) / decay_scale
    h = x.new_zeros(x.shape[0], inner, STATES)
    ys = []
    for t in range(length):
        h = decay_rule(delta[:, t]) * h + (delta[:, t] * u[:, t])[..., None] * B[:, t, None, :]
        ys.append((h * C[:, t, None, :]).sum(-1))
    y = torch.stack(ys, 1)
    groups = y.unflatten(-1, (-1, 8))
    y = (groups / groups.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()).flatten(-2)
    return ((y + mixer.D * u) * F.silu(z)) @ mixer.out_proj.weight.t()


def _rules(mixer, decay_scale):
    """Paper Table 4(a)'s decays: data-dependent exp(delta_t A), a per-token exp(A / s), none."""
    if mixer.decay is None:
        return lambda delta: torch.ones(delta.shape[0], 2 * DIMS, STATES, dtype=delta.dtype)
    A = -torch.exp(mixer.A_log.detach())
    if mixer.decay == 'data_dependent':
        return lambda delta: torch.exp(delta[..., None] * A)
    return lambda delta: torch.exp(A / decay_scale).expand(delta.shape[0], -1, -1)


@pytest.mark.parametrize('scan_impl', ['auto', 'chunked'])
@pytest.mark.parametrize('decay', ['data_dependent', 'learnable', 'fixed', None])
def test_mixer_decay_is_the_formula(decay, scan_impl):
    mixer = _mixer(decay, scan_impl=scan_impl)
    x = torch.randn(2, 11, DIMS, dtype=torch.float64)
    layout = TokenLayout((1, 11), position_scale=3., decay_scale=2.)
    with torch.no_grad():
        expected = _oracle(mixer, x, _rules(mixer, 2.), position_scale=3., decay_scale=2.)
        # Delta is computed in fp32 (as released), the rest in fp64
        torch.testing.assert_close(mixer(x, layout), expected, rtol=1e-5, atol=1e-6)


def test_static_decays_start_at_the_released_initial_decay():
    """A = -n dt_e: the data-dependent decay exp(delta A) at the initial steps dt_e (log-spaced 1e-3 .. 1e-1) and
    A = -(1..N)."""
    steps = torch.logspace(-3, -1, 2 * DIMS, dtype=torch.float64)
    expected = -steps[:, None] * torch.arange(1., STATES + 1, dtype=torch.float64)
    for decay in ('learnable', 'fixed'):
        mixer = DefocusMambaMixer(DIMS, state_dims=STATES, dt_rank=RANK, norm_group_size=8, decay=decay)
        torch.testing.assert_close(-torch.exp(mixer.A_log.double()), expected, rtol=1e-5, atol=0)


def test_only_learnable_parts_are_parameters():
    """Learnable decay and RoPE train (gradients reach them); fixed ones are buffers that keep their name in the
    state dict (so checkpoints of either load); no decay has no A_log at all."""
    x = torch.randn(1, 6, DIMS, dtype=torch.float64)
    learnable = _mixer('learnable')
    learnable(x).sum().backward()
    assert learnable.A_log.grad.abs().sum() > 0 and learnable.rope.freq.grad.abs().sum() > 0
    fixed = _mixer('fixed', rope_learnable=False)
    names = {name for name, _ in fixed.named_parameters()}
    assert not {'A_log', 'rope.freq'} & names and {'A_log', 'rope.freq'} <= set(fixed.state_dict())
    assert 'A_log' not in _mixer(None).state_dict()
    fixed.load_state_dict(learnable.state_dict())  # the same keys and shapes
    with torch.no_grad():
        torch.testing.assert_close(fixed(x), _oracle(fixed, x, _rules(fixed, 1.)), rtol=1e-5, atol=1e-6)


def test_backbone_passes_the_options_to_every_mixer():
    model = DefocusMamba(dict(embed_dims=32, num_layers=2), decay='fixed', rope_learnable=False)
    assert all(layer.attn.decay == 'fixed' and not layer.attn.rope.learnable for layer in model.layers)
    assert sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for p in DefocusMamba(dict(embed_dims=32, num_layers=2)).parameters()) - 2 * (64 * 16 + 16)


def test_unknown_decay_is_explained():
    with pytest.raises(ValueError, match='decay'):
        DefocusMambaMixer(DIMS, state_dims=STATES, dt_rank=RANK, norm_group_size=8, decay='data-dependent')


def _head(feature, aux_loss=None):
    torch.manual_seed(0)
    return MODELS.build(dict(type='DefocusClsHead', num_classes=5, in_channels=6, feature=feature,
                             aux_loss=aux_loss)).double()


@pytest.mark.parametrize('feature', ['cls', 'avg', 'cls_avg'])
def test_head_feature_is_the_formula(feature):
    """Table 4(c): logits W f + b with f the class token (last), the patch tokens' mean, or both concatenated
    (W = [W_cls | W_avg] of width 2 D); the loss is the CE of those logits."""
    head = _head(feature)
    tokens = torch.randn(3, 7, 6, dtype=torch.float64)
    cls, mean = tokens[:, -1], tokens[:, :-1].sum(1) / 6
    weight, bias = head.fc.weight.detach(), head.fc.bias.detach()
    if feature == 'cls_avg':
        expected = cls @ weight[:, :6].t() + mean @ weight[:, 6:].t() + bias
    else:
        expected = (cls if feature == 'cls' else mean) @ weight.t() + bias
    with torch.no_grad():
        torch.testing.assert_close(head((tokens, )), expected)
        labels = [0, 3, 4]
        losses = head.loss((tokens, ), [DataSample().set_gt_label(label) for label in labels])
    assert set(losses) == {'loss_cls'}  # no auxiliary loss: the term carries weight 1
    log_probs = expected - expected.exp().sum(-1, keepdim=True).log()
    torch.testing.assert_close(losses['loss_cls'], -log_probs[range(3), labels].mean())


def test_head_feature_keeps_the_auxiliary_loss():
    head = _head('avg', aux_loss='pooled')
    tokens = torch.randn(2, 4, 6, dtype=torch.float64)
    with torch.no_grad():
        losses = head.loss((tokens, ), [DataSample().set_gt_label(label) for label in (1, 2)])
        pooled = head.fc(tokens[:, :-1].mean(1))
    torch.testing.assert_close(losses['loss_cls'], 0.5 * F.cross_entropy(pooled, torch.tensor([1, 2])))
    assert 'loss_aux' in losses
    with pytest.raises(ValueError, match='feature'):
        _head('mean')
