"""Mask-mode contract, run over every backbone mmcausal registers.

The backbones are read from the registry, so a new one is checked by being registered; it only has to add its tiny
settings and the mask modes it accepts to :data:`CASES`, and its default mode to :data:`DEFAULT_MODES` (a test fails,
naming it, until it does). Every backbone takes a ``mask_mode`` argument. Each runs in every mode it accepts, and
the behaviour of the mode is checked on the token sequence the backbone really uses (its first block's input,
perturbed by a pre-hook), read back from its per-token outputs (fp64, so "unchanged" is exact up to rounding):

* ``'causal'``: perturbing the tokens after slot ``t`` leaves the outputs up to ``t`` unchanged (and does change the
  later ones);
* in every mode the class token sees every patch: where the sequence has one, its output does and the
  ``'cls_token'`` output reads its slot; where it joins after the blocks (CaiT's class attention), the class feature
  does;
* ``'bidirectional'``: perturbing the later tokens changes earlier outputs (so the causal check can fail);
* ``'official'`` (iLLaMA Eq. 2): every attention map is zero above the diagonal and is not renormalised (rows sum to
  at most 1, the last to 1);
* a soft-mask rate of 1 turns either mask off: the output equals the bidirectional model's with the same weights;
* a mode the backbone does not accept is refused at construction with a one-line user error naming ``mask_mode``;
* built without ``mask_mode``, a backbone computes what it computes in its declared default mode.
"""
import inspect
import warnings
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import pytest
import torch
from torch import Tensor, nn

import mmcausal  # noqa: F401  (registers every component)
from build_utils import registered_backbones
from mmcausal.models.layers import record_attention
from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError

pytestmark = pytest.mark.usefixtures('single_thread')

MODES = ('bidirectional', 'causal', 'official')
SIZE = (32, 32)  # a 4 x 4 patch grid at patch 8 (8 x 8 tokens in the pyramid's first stage)


@dataclass(frozen=True)
class Case:
    """A tiny configuration of a backbone whose outputs are per-token (``'raw'``, or the first stage's
    ``'featmap'`` for a pyramid), and the mask modes it accepts."""
    kwargs: dict
    modes: Tuple[str, ...]
    forward_kwargs: dict = field(default_factory=dict)
    name: str = ''
    size: Tuple[int, int] = SIZE


PLAIN = dict(arch=dict(embed_dims=32, num_layers=2, num_heads=2), img_size=32, patch_size=8, out_type='raw')
# LayerScale (CaiT 1e-5, the pyramid 1e-4 at init) would shrink what attention adds below the tolerances: set to 1
CAIT = dict(PLAIN, layer_scale_init_value=1., init_cfg=dict(type='TruncNormal', layer='Linear', std=.02, bias=.1))
# class name -> its tiny configurations; a newly registered backbone adds its line here.
CASES: Dict[str, Tuple[Case, ...]] = {
    'ILLaMA': (Case(PLAIN, MODES), ),
    'VisionLLaMA': (
        Case(PLAIN, MODES),
        # 2 x 2 windows in blocks 0 and 2, global block 1
        Case(dict(PLAIN, arch=dict(embed_dims=32, num_layers=3, num_heads=2), with_cls_token=False, window_size=2,
                  global_blocks=(1, )), MODES, name='windowed'),
        # a 5 x 6 grid: the last window row and column overhang it (padding, masked out of the keys)
        Case(dict(PLAIN, arch=dict(embed_dims=32, num_layers=3, num_heads=2), with_cls_token=False, window_size=2,
                  global_blocks=(1, )), MODES, name='windowed-padded', size=(40, 48)),
    ),
    'MAEVisionLLaMA': (Case(PLAIN, ('bidirectional', ), forward_kwargs=dict(mask=False)), ),
    'PyramidVisionLLaMA': (Case(dict(arch=dict(embed_dims=[16, 32], num_heads=[2, 2], depths=[2, 2]),
                                     patch_sizes=(4, 2), sr_ratios=(2, 1), window_size=2, out_type='featmap',
                                     out_indices=0, layer_scale_init_value=1.), ('bidirectional', )), ),
    'DefocusMamba': (Case(dict(PLAIN, arch=dict(embed_dims=32, num_layers=2, dt_rank=4)), ('causal', )), ),
    'DefocusViT': (Case(PLAIN, ('causal', )), ),
    # chunks of 4 tokens, so the cut points fall inside and between chunks
    'DefocusRetNet': (Case(dict(PLAIN, retention_chunk_size=4), ('causal', )), ),
    # 16 tokens <= width 32: 'auto' takes the explicit talking-heads path; the second case forces the SDPA one. Non-zero
    # Linear biases, so the talking-heads bias bw (summed over the keys a query may see) counts
    'CaiT': (Case(CAIT, ('bidirectional', 'causal')),
             Case(dict(CAIT, attn_impl='sdpa'), ('bidirectional', 'causal'), name='sdpa')),
}
# class name -> the mode it runs in when the config names none
DEFAULT_MODES = {'ILLaMA': 'causal', 'VisionLLaMA': 'bidirectional', 'MAEVisionLLaMA': 'bidirectional',
                 'PyramidVisionLLaMA': 'bidirectional', 'DefocusMamba': 'causal', 'DefocusViT': 'causal',
                 'DefocusRetNet': 'causal', 'CaiT': 'bidirectional'}


def takes_mask_mode(name: str) -> bool:
    """Whether the backbone's constructor (or one it passes its keyword arguments to) has a ``mask_mode``."""
    return any('mask_mode' in inspect.signature(klass.__init__).parameters
               for klass in MODELS.get(name).__mro__ if '__init__' in vars(klass))


def has_soft_mask_rate(name: str) -> bool:
    """Whether the backbone has a soft-mask rate (iLLaMA Eq. 2) for :class:`~mmcausal.engine.SoftMaskHook`."""
    return isinstance(getattr(MODELS.get(name), 'soft_mask_rate', None), property)


def _params(select):
    return [pytest.param(name, case, mode, id=f'{name}{"-" + case.name if case.name else ""}-{mode}')
            for name in registered_backbones() for case in CASES.get(name, ())
            for mode in MODES if select(name, case, mode)]


def build(name: str, case: Case, mode: Optional[str], seed: int = 0, **overrides) -> nn.Module:
    """The tiny backbone in ``mode`` (None: the backbone's default), seeded, initialised, in eval mode."""
    torch.manual_seed(seed)
    kwargs = dict(case.kwargs, **overrides)
    if mode is not None:
        kwargs['mask_mode'] = mode
    model = MODELS.build(dict(type=name, **kwargs))
    model.init_weights()
    return model.double().eval()


def images(size: Tuple[int, int], seed: int = 1) -> Tensor:
    torch.manual_seed(seed)
    return torch.randn(2, 3, *size, dtype=torch.float64)


def token_outputs(model: nn.Module, case: Case, perturb: Optional[slice] = None) -> Tensor:
    """The ``(B, slots, D)`` outputs in sequence order, with the first block's input tokens in ``perturb``
    (sequence slots) replaced by other values."""

    def replace(module, args):
        tokens = args[0].clone()
        generator = torch.Generator().manual_seed(2)
        tokens[:, perturb] = 3 * torch.randn(tokens[:, perturb].shape, generator=generator, dtype=tokens.dtype)
        return (tokens, *args[1:])

    handle = model.blocks()[0].register_forward_pre_hook(replace) if perturb is not None else None
    try:
        with torch.no_grad():
            out = model(images(case.size), **case.forward_kwargs)[0]
    finally:
        if handle is not None:
            handle.remove()
    return out.flatten(2).transpose(1, 2) if out.dim() == 4 else out  # a pyramid stage's map: raster order


def cls_slot(model: nn.Module, num_slots: int) -> Optional[int]:
    """The class token's slot in the sequence (None without one in the sequence)."""
    position = getattr(model, 'cls_position', None)
    return None if position is None else 0 if position == 'first' else num_slots - 1


def first_patch_slot(model: nn.Module) -> int:
    return 1 if getattr(model, 'cls_position', None) == 'first' else 0


def changed(a: Tensor, b: Tensor) -> bool:
    """Beyond fp64 rounding (the models run in fp64, so a token that sees another moves far more than this)."""
    return (a - b).abs().max().item() > 1e-8


def test_every_registered_backbone_takes_a_mask_mode_and_has_its_modes_listed():
    registered = registered_backbones()
    assert {'ILLaMA', 'VisionLLaMA', 'PyramidVisionLLaMA', 'CaiT', 'DefocusViT'} <= set(registered)
    for table in ('CASES', 'DEFAULT_MODES'):
        listed = set(globals()[table])
        missing = sorted(set(registered) - listed)
        assert not missing, (f'registered backbones without an entry in {table} of {__file__}: {missing}; add their '
                             'tiny settings, the mask modes they accept and their default')
        stale = sorted(listed - set(registered))
        assert not stale, f'{table} lists backbones that are not registered: {stale}'
    without = [name for name in registered if not takes_mask_mode(name)]
    assert not without, f'backbones without a mask_mode argument: {without}'
    for name in registered:
        assert all(DEFAULT_MODES[name] in case.modes for case in CASES[name]), f'{name}: default mode not accepted'


@pytest.mark.parametrize('name,case,mode', _params(lambda name, case, mode: mode == DEFAULT_MODES.get(name)))
def test_without_a_mask_mode_a_backbone_runs_in_its_default_mode(name, case, mode):
    default = token_outputs(build(name, case, None), case)
    torch.testing.assert_close(default, token_outputs(build(name, case, mode), case), rtol=0, atol=0)


@pytest.mark.parametrize('name,case,mode', _params(lambda name, case, mode: mode in ('bidirectional', 'causal')
                                                   and mode in case.modes))
def test_a_token_sees_later_tokens_exactly_when_the_mode_allows(name, case, mode):
    """Causal: the outputs up to slot ``t`` ignore every token after it, at two cut points (one inside the first
    window row of the windowed case, one in the middle); bidirectional: they do not."""
    model = build(name, case, mode)
    clean = token_outputs(model, case)
    num_slots = clean.shape[1]
    for keep in (3, num_slots // 2 + 1):
        perturbed = token_outputs(model, case, slice(keep, None))
        assert changed(perturbed[:, keep:], clean[:, keep:]), 'the perturbation must reach the outputs'
        if mode == 'causal':
            torch.testing.assert_close(perturbed[:, :keep], clean[:, :keep], rtol=0, atol=1e-12,
                                       msg=lambda m: f'{name}: an output before slot {keep} saw a later token: {m}')
        else:
            assert changed(perturbed[:, :keep], clean[:, :keep]), f'{name}: earlier outputs ignore later tokens'


@pytest.mark.parametrize('name,case,mode', _params(lambda name, case, mode: mode in case.modes))
def test_the_class_token_sees_every_patch(name, case, mode):
    """In every accepted mode the class token's output depends on the first patch (under a causal mask it must
    therefore sit after the patches); a class token that joins after the blocks (CaiT) is read as the class
    feature (``out_type='cls_token'``)."""
    model = build(name, case, mode)
    clean = token_outputs(model, case)
    slot = cls_slot(model, clean.shape[1])
    if slot is None and getattr(model, 'has_cls_token', False):
        model, slot = build(name, case, mode, out_type='cls_token'), slice(None)
        clean = token_outputs(model, case)
    if slot is None:
        pytest.skip('no class token')
    first = first_patch_slot(model)
    perturbed = token_outputs(model, case, slice(first, first + 1))
    assert changed(perturbed[:, slot], clean[:, slot]), f'{name} in {mode!r}: the class token misses the first patch'


@pytest.mark.parametrize('name,case,mode', _params(lambda name, case, mode: mode in case.modes and 'raw' in (
    case.kwargs.get('out_type'), ) and name != 'MAEVisionLLaMA'))
def test_the_cls_token_output_is_the_class_tokens_slot(name, case, mode):
    """``out_type='cls_token'`` reads the slot where the mode put the class token (``'featmap'`` the others)."""
    model = build(name, case, mode)
    raw = token_outputs(model, case)
    slot, first = cls_slot(model, raw.shape[1]), first_patch_slot(model)
    if slot is None:
        pytest.skip('no class token in the sequence')
    torch.testing.assert_close(token_outputs(build(name, case, mode, out_type='cls_token'), case), raw[:, slot],
                               rtol=0, atol=0)
    featmap = token_outputs(build(name, case, mode, out_type='featmap'), case)
    torch.testing.assert_close(featmap, raw[:, first:first + featmap.shape[1]], rtol=0, atol=0)


@pytest.mark.parametrize('name,case,mode', _params(lambda name, case, mode: mode == 'official' and mode in case.modes))
def test_official_attention_maps_are_masked_after_the_softmax(name, case, mode):
    """iLLaMA Eq. 2 at alpha = 0: ``softmax(q k^T) * tril``, not renormalised, in every block (windows too)."""
    model = build(name, case, mode)
    with record_attention(model) as records:
        token_outputs(model, case)
    maps = [weights for calls in records.values() for weights in calls]
    assert len(maps) == len(model.blocks())
    for weights in maps:
        assert (weights.triu(1) == 0).all(), 'a query attends to a later key'
        rows = weights.sum(-1)
        assert (rows <= 1 + 1e-6).all()
        torch.testing.assert_close(rows[..., -1], torch.ones_like(rows[..., -1]))
        assert (rows[..., :-1] < 1 - 1e-3).any(), 'rows were renormalised'


@pytest.mark.parametrize('name,case,mode', _params(lambda name, case, mode: mode in ('causal', 'official')
                                                   and mode in case.modes and has_soft_mask_rate(name)))
def test_soft_mask_rate_one_is_bidirectional_attention(name, case, mode):
    """``alpha = 1`` lifts the mask: the output equals the bidirectional model's with the same weights (the class
    token compared at its own slot in each)."""
    masked, bidirectional = build(name, case, mode), build(name, case, 'bidirectional')
    masked.soft_mask_rate = 1.
    out, ref = token_outputs(masked, case), token_outputs(bidirectional, case)
    out_cls, ref_cls = cls_slot(masked, out.shape[1]), cls_slot(bidirectional, ref.shape[1])
    if out_cls is not None:
        torch.testing.assert_close(out[:, out_cls], ref[:, ref_cls])
    out_first, ref_first = first_patch_slot(masked), first_patch_slot(bidirectional)
    num_patches = out.shape[1] - (out_cls is not None)
    torch.testing.assert_close(out[:, out_first:out_first + num_patches], ref[:, ref_first:ref_first + num_patches])
    masked.soft_mask_rate = 0.
    assert changed(token_outputs(masked, case), out), 'alpha = 0 must mask'


@pytest.mark.parametrize('name,case,mode', _params(lambda name, case, mode: mode not in case.modes))
def test_a_mode_the_backbone_cannot_honour_is_refused_in_one_line(name, case, mode):
    with pytest.raises(UserInputError) as error:
        build(name, case, mode)
    message = str(error.value)
    assert '\n' not in message and f'mask_mode={mode!r}' in message, message


@pytest.mark.parametrize('name', registered_backbones())
def test_an_unknown_mode_is_refused_in_one_line(name):
    with pytest.raises(UserInputError, match='choose one of') as error:
        build(name, CASES[name][0], 'causal_soft')
    assert '\n' not in str(error.value)


@pytest.mark.parametrize('name', registered_backbones())
def test_weights_trained_in_another_mode_are_named_when_they_load(name):
    """The keys do not change with the mode, the attention does: a backbone that accepts several modes writes its mode
    into its state dict and warns, naming both, when a file trained in another mode loads (a causal VisionLLaMA
    checkpoint evaluated by a bidirectional config was a silent wrong result); files without the record (converted
    official weights) load silently. A backbone with one mode records nothing."""
    case = CASES[name][0]
    state = build(name, case, case.modes[-1]).state_dict()
    if len(case.modes) == 1:
        assert 'mask_mode' not in state
        return
    from mmcausal.models.layers.mask_mode import decode_mask_mode
    assert decode_mask_mode(state['mask_mode']) == case.modes[-1]
    other = build(name, case, case.modes[0])
    named = f'trained with mask_mode={case.modes[-1]!r}.*uses mask_mode={case.modes[0]!r}'
    with pytest.warns(UserWarning, match=named):
        other.load_state_dict(state, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        other.load_state_dict({key: value for key, value in state.items() if key != 'mask_mode'}, strict=True)
        build(name, case, case.modes[-1]).load_state_dict(state, strict=True)
