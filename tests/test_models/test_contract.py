"""OpenMMLab backbone contract, run over every backbone mmcausal registers.

The backbones are read from the registry, so a new family is tested by being registered; it only has to add
its tiny constructor settings to :data:`TINY` (a test fails, naming it, until it does). Checked per backbone:
every ``out_type`` x ``out_indices`` at an input that is not a multiple of the patch size, ``frozen_stages``,
``get_layer_depth`` over every parameter, ``with_cp`` equality, a strict state-dict round trip, ``Pretrained``
init with a prefix, that a forward after another input shape equals a fresh model's, and that feature maps are
read correctly by mmcv's compiled ``RoIAlign`` (the RoI extractor of every two-stage detector).
"""
import math
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Tuple, Union

import pytest
import torch
from mmcv.ops import roi_align as mmcv_roi_align
from torch import Tensor, nn
from torchvision.ops import roi_align as reference_roi_align

import mmcausal  # noqa: F401  (registers every component)
from build_utils import registered_backbones
from mmcausal.models.layers import OUT_TYPES
from mmcausal.models.vision_llama.pyramid import PyramidBackbone
from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError

pytestmark = pytest.mark.usefixtures('single_thread')

PREFIX = 'backbone.'
ODD_SIZE = (37, 45)  # neither side is a multiple of the tiny patch size (8)
SIZE_1, SIZE_2 = (32, 48), (48, 32)  # same token count, transposed grid
TINY_ARCH = dict(embed_dims=32, num_layers=3, num_heads=2)


@dataclass(frozen=True)
class Tiny:
    """One tiny configuration of a backbone: constructor kwargs, the ``out_type`` values it supports (every other
    one must be rejected), the ``out_indices`` to try and extra ``forward`` kwargs."""
    kwargs: dict
    out_types: Tuple[str, ...] = OUT_TYPES
    out_indices: Tuple[Union[int, Tuple[int, ...]], ...] = (-1, (0, -2), (1, -1))
    forward_kwargs: dict = field(default_factory=dict)
    name: str = ''


_BASE = dict(arch=TINY_ARCH, img_size=32, patch_size=8)
# class name -> its tiny configurations; a newly registered backbone adds its line here.
TINY: Dict[str, Tuple[Tiny, ...]] = {
    'ILLaMA': (Tiny(_BASE), ),
    'VisionLLaMA': (
        Tiny(_BASE),
        Tiny(dict(_BASE, with_cls_token=False, window_size=2, global_blocks=(1, ), out_type='featmap'),
             out_types=('raw', 'featmap', 'avg_featmap'), name='windowed'),
    ),
    # the plain (unmasked) forward is the backbone contract; the masked MAE forward returns (latent, mask, ids)
    'MAEVisionLLaMA': (Tiny(_BASE, out_types=('raw', ), out_indices=(-1, ), forward_kwargs=dict(mask=False)), ),
    # stage-based: out_indices count stages
    'PyramidVisionLLaMA': (
        Tiny(dict(arch=dict(embed_dims=[16, 32], num_heads=[2, 2], depths=[2, 2]), patch_sizes=(4, 2),
                  sr_ratios=(2, 1), window_size=2, out_type='featmap', out_indices=(0, 1)),
             out_types=('featmap', 'avg_featmap'), out_indices=(-1, (0, 1))),
        Tiny(dict(arch=dict(embed_dims=[16, 32], num_heads=[2, 2], depths=[2, 2]), patch_sizes=(4, 2),
                  sr_ratios=(2, 1), window_size=2, out_indices=-1, gsa_key_pos='official', rope_anchor=14,
                  as2d_scaling='isotropic',
                  mask_window_padding=False, out_type='avg_featmap', norm_after_stage=False, final_norm=True,
                  official_double_norm=True),
             out_types=('avg_featmap', ), out_indices=(-1, ), name='official'),
    ),
    'DefocusMamba': (
        Tiny(dict(arch=dict(embed_dims=32, num_layers=3, dt_rank=4), img_size=32, patch_size=8)),
        # sectioned token order with automatic scales: 37x45 px is padded to 3x3 sections of the 16 px (2x2 patch) grid
        Tiny(dict(arch=dict(embed_dims=32, num_layers=3, dt_rank=4), img_size=16, patch_size=8, patch_rearrange=True,
                  delta_scale_factor='auto', rope_scale_factor='auto', rope='paired', out_type='featmap'),
             out_types=('cls_token', 'featmap', 'avg_featmap'), name='rearranged'),
    ),
    'DefocusViT': (
        Tiny(_BASE),
        Tiny(dict(_BASE, img_size=16, patch_rearrange=True, delta_scale_factor='auto', rope_scale_factor='auto',
                  out_type='featmap'), out_types=('cls_token', 'featmap', 'avg_featmap'), name='rearranged'),
    ),
    # chunks of 4 tokens: the contract's 17..31 tokens cross chunk boundaries (the default 64 would be one chunk)
    'DefocusRetNet': (Tiny(_BASE), Tiny(dict(_BASE, retention_chunk_size=4), name='chunked')),
    # the class-attention stage and final norm exist only for the outputs that use them; dense features normalised
    'CaiT': (Tiny(_BASE), Tiny(dict(_BASE, out_type='featmap', feature_norm='final', attn_impl='explicit'),
                               name='explicit-normed')),
}


def _cases() -> Iterator[Tuple[str, Tiny]]:
    for name in registered_backbones():
        for tiny in TINY.get(name, (None, )):
            yield name, tiny


def _case_id(name: str, tiny: Tiny) -> str:
    return f'{name}-{tiny.name}' if tiny is not None and tiny.name else name


CASES = [pytest.param(name, tiny, id=_case_id(name, tiny)) for name, tiny in _cases()]


def _require(tiny: Tiny, name: str) -> Tiny:
    if tiny is None:
        pytest.fail(f'Backbone {name!r} is registered but has no tiny configuration: add a line '
                    f'{name!r}: (Tiny(dict(arch=..., img_size=32, patch_size=8)), ) to TINY in {__file__}.')
    return tiny


def build(name: str, tiny: Tiny, seed: int = 0, **overrides) -> nn.Module:
    """The tiny backbone, seeded and initialised, in eval mode."""
    torch.manual_seed(seed)
    model = MODELS.build(dict(type=name, **{**tiny.kwargs, **overrides}))
    model.init_weights()
    return model.eval()


def forward(model: nn.Module, tiny: Tiny, size: Tuple[int, int], seed: int = 1) -> Tuple[Tensor, ...]:
    """The backbone outputs for a seeded random batch of two ``size`` images."""
    torch.manual_seed(seed)
    return model(torch.randn(2, 3, *size), **tiny.forward_kwargs)


def assert_same_outputs(actual: Tuple[Tensor, ...], expected: Tuple[Tensor, ...]) -> None:
    assert len(actual) == len(expected)
    for out, ref in zip(actual, expected):
        torch.testing.assert_close(out, ref, rtol=0, atol=0)


def is_stem(param_name: str) -> bool:
    """Stem parameters: the (first) patch embedding and the backbone's own tokens / tables (cls token, pos embed)."""
    return param_name.startswith(('patch_embed.', 'stages.0.patch_embed.')) or '.' not in param_name


def block_index(param_name: str) -> int:
    """Index of the block ``layers.<i>`` holding a parameter, or -1."""
    parts = param_name.split('.')
    return int(parts[1]) if parts[0] == 'layers' else -1


def stage_index(param_name: str) -> int:
    """Index of the stage ``stages.<s>`` holding a parameter, or -1."""
    parts = param_name.split('.')
    return int(parts[1]) if parts[0] == 'stages' else -1


def num_units(tiny: Tiny) -> int:
    """What ``out_indices`` / ``frozen_stages`` count: stages of a stage-based backbone, else blocks."""
    arch = tiny.kwargs['arch']
    return len(arch['depths']) if 'depths' in arch else arch['num_layers']


def is_pyramid(name: str) -> bool:
    return issubclass(MODELS.get(name), PyramidBackbone)


def expected_shapes(name: str, tiny: Tiny, model: nn.Module, out_type: str, out_indices) -> List[tuple]:
    """Output shapes for two ``ODD_SIZE`` images: the image is padded bottom/right to the patch size, so a grid is
    ``ceil(H / p) x ceil(W / p)`` (per stage, from the previous stage's grid)."""
    indices = [out_indices] if isinstance(out_indices, int) else list(out_indices)
    arch = tiny.kwargs['arch']
    if not is_pyramid(name):
        dims = arch['embed_dims']
        grid = tuple(math.ceil(side / tiny.kwargs['patch_size']) for side in ODD_SIZE)
        num_tokens = grid[0] * grid[1] + (model.cls_position is not None)
        shape = dict(raw=(2, num_tokens, dims), cls_token=(2, dims), featmap=(2, dims, *grid),
                     avg_featmap=(2, dims))[out_type]
        return [shape] * len(indices)
    grids, grid = [], ODD_SIZE
    for patch in tiny.kwargs['patch_sizes']:
        grid = tuple(math.ceil(side / patch) for side in grid)
        grids.append(grid)
    stages = sorted(i % len(grids) for i in indices)
    return [(2, arch['embed_dims'][s], *grids[s]) if out_type == 'featmap' else (2, arch['embed_dims'][s])
            for s in stages]


def expected_frozen(name: str, param_name: str, k: int, units: int) -> bool:
    """``frozen_stages=k``: the stem and the first ``k`` blocks (plain) or stages (pyramid); everything at
    ``k >= units``."""
    if k < 0:
        return False
    unit = stage_index(param_name) if is_pyramid(name) else block_index(param_name)
    return k >= units or is_stem(param_name) or 0 <= unit < k


def expected_depth(name: str, tiny: Tiny, param_name: str) -> Tuple[int, int]:
    """Layer id for lr decay (mmpretrain's rule): stem 0, block ``i`` counted over the whole network -> ``i + 1``,
    everything after the last block ``L + 1``, out of ``L + 2``. In a pyramid a later patch embedding shares its
    stage's first block id and a stage norm its last block id."""
    arch = tiny.kwargs['arch']
    if not is_pyramid(name):
        total = arch['num_layers'] + 2
        block = block_index(param_name)
        return (0 if is_stem(param_name) else block + 1 if block >= 0 else total - 1), total
    depths = arch['depths']
    total = sum(depths) + 2
    stage = stage_index(param_name)
    if is_stem(param_name):
        return 0, total
    if stage < 0:
        return total - 1, total
    first = 1 + sum(depths[:stage])
    part = param_name.split('.')[2]
    if part == 'patch_embed':
        return first, total
    if part == 'blocks':
        return first + int(param_name.split('.')[3]), total
    return first + depths[stage] - 1, total


def test_every_registered_backbone_has_a_tiny_configuration():
    registered = registered_backbones()
    assert {'ILLaMA', 'VisionLLaMA'} <= set(registered)
    missing = sorted(set(registered) - set(TINY))
    assert not missing, f'registered backbones without a tiny configuration in TINY: {missing}'
    stale = sorted(set(TINY) - set(registered))
    assert not stale, f'TINY lists backbones that are not registered: {stale}'


def _output_cases():
    for name, tiny in _cases():
        if tiny is None:
            yield pytest.param(name, tiny, 'raw', -1, id=name)
            continue
        for out_type in tiny.out_types:
            for out_indices in tiny.out_indices:
                yield pytest.param(name, tiny, out_type, out_indices,
                                   id=f'{_case_id(name, tiny)}-{out_type}-{out_indices}')


@pytest.mark.parametrize('name,tiny,out_type,out_indices', list(_output_cases()))
def test_outputs_at_a_size_that_is_not_a_multiple_of_the_patch(name, tiny, out_type, out_indices):
    """One output per index; the image is padded bottom/right, so the grid is ``ceil(H/p) x ceil(W/p)``."""
    tiny = _require(tiny, name)
    model = build(name, tiny, out_type=out_type, out_indices=out_indices)
    with torch.no_grad():
        outs = forward(model, tiny, ODD_SIZE)
    assert isinstance(outs, tuple)
    assert len(outs) == (1 if isinstance(out_indices, int) else len(out_indices))
    assert [tuple(out.shape) for out in outs] == expected_shapes(name, tiny, model, out_type, out_indices)
    assert all(torch.isfinite(out).all() for out in outs)


def _rejected_out_types():
    for name, tiny in _cases():
        rejected = OUT_TYPES if tiny is None else tuple(t for t in OUT_TYPES if t not in tiny.out_types)
        for out_type in rejected:
            yield pytest.param(name, tiny, out_type, id=f'{_case_id(name, tiny)}-{out_type}')


@pytest.mark.parametrize('name,tiny,out_type', list(_rejected_out_types()))
def test_out_types_not_listed_are_rejected_with_a_user_error(name, tiny, out_type):
    """Keeps ``Tiny.out_types`` honest: an ``out_type`` left out of the table must be unsupported."""
    tiny = _require(tiny, name)
    with pytest.raises(UserInputError):
        MODELS.build(dict(tiny.kwargs, type=name, out_type=out_type))


@pytest.mark.parametrize('frozen_stages', [-1, 0, 1, 'all'])
@pytest.mark.parametrize('name,tiny', CASES)
def test_frozen_stages_freeze_exactly_the_stem_and_the_first_units(name, tiny, frozen_stages):
    tiny = _require(tiny, name)
    units = num_units(tiny)
    k = units if frozen_stages == 'all' else frozen_stages
    model = build(name, tiny, frozen_stages=k).train()

    def frozen_param(param_name: str) -> bool:
        return expected_frozen(name, param_name, k, units)

    wrong = [n for n, p in model.named_parameters() if p.requires_grad == frozen_param(n)]
    assert not wrong, f'frozen_stages={k}: requires_grad is wrong for {wrong}'
    for module_name, module in model.named_modules():
        # every module of the stem and of the blocks / stages (dropout / drop path included) follows its unit;
        # elsewhere (final norms) the modules holding parameters; the backbone itself stays in train mode
        parts = module_name.split('.')
        unit = parts[:3] if parts[:3] == ['stages', '0', 'patch_embed'] else parts[:2]
        if unit[0] == 'patch_embed' or (unit[0] in ('layers', 'stages') and len(parts) >= 2):
            frozen = frozen_param(f'{".".join(unit)}.weight')
        elif module_name and any(True for _ in module.parameters(recurse=False)):
            frozen = all(frozen_param(n) for n, _ in module.named_parameters(prefix=module_name, recurse=False))
        else:
            continue
        assert module.training != frozen, f'frozen_stages={k}: {module_name!r} has training={module.training}'


@pytest.mark.parametrize('name,tiny', CASES)
def test_layer_depth_covers_every_parameter(name, tiny):
    """mmpretrain's rule (see :func:`expected_depth`), ids never falling along the network."""
    tiny = _require(tiny, name)
    model = build(name, tiny)
    depths = []
    for param_name, _ in model.named_parameters():
        depth, num_ids = model.get_layer_depth(PREFIX + param_name, PREFIX)
        assert (depth, num_ids) == expected_depth(name, tiny, param_name), param_name
        depths.append(depth)
    assert depths == sorted(depths)
    assert set(range(num_ids - 1)) <= set(depths)  # the stem and every block
    assert model.get_layer_depth('head.fc.weight', PREFIX) == (num_ids - 1, num_ids)


@pytest.mark.parametrize('name,tiny', CASES)
def test_with_cp_gives_the_same_outputs_and_gradients(name, tiny):
    """Training mode with drop path on (the recomputation must replay the same draws); every block runs twice."""
    tiny = _require(tiny, name)
    results = []
    for with_cp in (False, True):
        model = build(name, tiny, with_cp=with_cp, drop_path_rate=0.2).train()
        calls = [0]
        model.blocks()[-1].register_forward_pre_hook(  # pre: the recomputation may stop early
            lambda *_: calls.__setitem__(0, calls[0] + 1))
        outs = forward(model, tiny, ODD_SIZE)
        sum(out.square().sum() for out in outs).backward()
        grads = {n: p.grad for n, p in model.named_parameters()}
        assert all(grad is not None for grad in grads.values())
        results.append((outs, grads, calls[0]))
    (plain, plain_grads, plain_calls), (cp, cp_grads, cp_calls) = results
    assert (plain_calls, cp_calls) == (1, 2), 'with_cp=True must recompute every block in the backward pass'
    assert_same_outputs(cp, plain)
    for param_name, grad in plain_grads.items():
        torch.testing.assert_close(cp_grads[param_name], grad, rtol=0, atol=0, msg=param_name)


@pytest.mark.parametrize('name,tiny', CASES)
def test_state_dict_round_trip(name, tiny):
    tiny = _require(tiny, name)
    source = build(name, tiny)
    fresh = build(name, tiny, seed=1)
    with torch.no_grad():
        expected = forward(source, tiny, ODD_SIZE)
        assert not torch.equal(forward(fresh, tiny, ODD_SIZE)[0], expected[0])
        fresh.load_state_dict(source.state_dict(), strict=True)
        assert_same_outputs(forward(fresh, tiny, ODD_SIZE), expected)


@pytest.mark.parametrize('name,tiny', CASES)
def test_pretrained_init_with_a_prefix(name, tiny, tmp_path):
    tiny = _require(tiny, name)
    source = build(name, tiny)
    path = tmp_path / 'model.pth'
    torch.save({'state_dict': {PREFIX + k: v for k, v in source.state_dict().items()}}, path)
    loaded = build(name, tiny, seed=1, init_cfg=dict(type='Pretrained', checkpoint=str(path), prefix=PREFIX))
    with torch.no_grad():
        assert_same_outputs(forward(loaded, tiny, ODD_SIZE), forward(source, tiny, ODD_SIZE))


@pytest.mark.parametrize('name,tiny', CASES)
def test_forward_after_another_input_shape_equals_a_fresh_model(name, tiny):
    """No table (positions, masks, resized embeddings) computed for one input shape leaks into the next."""
    tiny = _require(tiny, name)
    model = build(name, tiny)
    fresh = build(name, tiny)
    with torch.no_grad():
        forward(model, tiny, SIZE_1)
        assert_same_outputs(forward(model, tiny, SIZE_2), forward(fresh, tiny, SIZE_2))


def _featmap_cases():
    for name, tiny in _cases():
        if tiny is not None and 'featmap' in tiny.out_types:
            yield pytest.param(name, tiny, id=_case_id(name, tiny))


@pytest.mark.parametrize('name,tiny', list(_featmap_cases()))
def test_feature_maps_are_read_correctly_by_mmcv_roi_align(name, tiny):
    """mmcv's compiled ``RoIAlign`` (CPU and CUDA) reads its input's memory as contiguous NCHW and ignores strides;
    a map with channels-last strides (what ``tokens.transpose(1, 2).reshape(...)`` gives, and what convolutions of
    such a map give in the neck) is silently scrambled, and a detector on top learns nothing. Every feature map
    must be contiguous and give torchvision's stride-aware ``roi_align``."""
    tiny = _require(tiny, name)
    model = build(name, tiny, out_type='featmap')
    with torch.no_grad():
        outs = forward(model, tiny, ODD_SIZE)
    rois = torch.tensor([[0, 0.5, 1.0, 3.5, 2.5], [1, 0.0, 0.0, 2.0, 4.0]])  # (batch index, x1, y1, x2, y2) in cells
    for index, out in enumerate(outs):
        assert out.is_contiguous(), f'output {index} of {name} is not contiguous (strides {out.stride()})'
        torch.testing.assert_close(mmcv_roi_align(out, rois, (2, 2), 1.0, 2, 'avg', True),
                                   reference_roi_align(out, rois, (2, 2), 1.0, 2, True))
