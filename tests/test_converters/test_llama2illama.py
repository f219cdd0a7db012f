"""llama2illama: weight selection from a LLaMA-2 checkpoint (Meta and Hugging Face layouts) into an iLLaMA.

The LLaMA checkpoints are small synthetic ones written here in both layouts; the oracle is LLaMA's attention and
SwiGLU written from Meta's ``llama/model.py`` (complex rotation of interleaved pairs) and Hugging Face's
``rotate_half`` formulation, restricted to the selected heads, rotary pairs and channels with LLaMA's own
frequencies, never importing mmcausal.
"""
import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from mmcausal.converters.llama2illama import (
    LlamaCheckpointError,
    convert_llama2illama,
    read_llama_checkpoint,
    select_indices,
)
from mmcausal.models.illama import ILLaMA
from zygote import run_python

ROOT = Path(__file__).resolve().parents[2]
CONVERTER = ROOT / 'tools/model_converters/llama2illama.py'
THETA = 10000.

# A LLaMA of 5 layers, width 112 = 7 heads x 16, SwiGLU hidden 130, and the iLLaMA it initialises: 2 blocks of
# width 24 = 3 heads x 8, hidden 40. Residual 112 -> 24, heads 7 -> 3 and hidden 130 -> 40 do not divide (rounded
# linspace); rotary pairs 8 -> 4 do (every 2nd pair, whose frequency theta^(-2 * 2i / 16) is iLLaMA's theta^(-2i / 8)).
TEACHER = dict(dim=112, heads=7, kv_heads=7, hidden=130, layers=5)
STUDENT = dict(embed_dims=24, num_layers=2, num_heads=3, ffn_hidden_dims=40)
RESIDUAL = [round(i * 111 / 23) for i in range(24)]
HEADS = [0, 3, 6]
PAIRS = [0, 2, 4, 6]
HIDDEN = [round(i * 129 / 39) for i in range(40)]


def meta_llama(dim, heads, kv_heads, hidden, layers, seed=0):
    """A random LLaMA state dict in Meta's layout (norm weights away from 1 so a wrong mapping shows)."""
    gen = torch.Generator().manual_seed(seed)
    head_dim = dim // heads
    state = {'tok_embeddings.weight': torch.randn(50, dim, generator=gen),
             'norm.weight': torch.rand(dim, generator=gen), 'output.weight': torch.randn(50, dim, generator=gen)}
    for i in range(layers):
        p = f'layers.{i}.'
        state.update({
            p + 'attention.wq.weight': torch.randn(dim, dim, generator=gen) / math.sqrt(dim),
            p + 'attention.wk.weight': torch.randn(kv_heads * head_dim, dim, generator=gen) / math.sqrt(dim),
            p + 'attention.wv.weight': torch.randn(kv_heads * head_dim, dim, generator=gen) / math.sqrt(dim),
            p + 'attention.wo.weight': torch.randn(dim, dim, generator=gen) / math.sqrt(dim),
            p + 'feed_forward.w1.weight': torch.randn(hidden, dim, generator=gen) / math.sqrt(dim),
            p + 'feed_forward.w2.weight': torch.randn(dim, hidden, generator=gen) / math.sqrt(hidden),
            p + 'feed_forward.w3.weight': torch.randn(hidden, dim, generator=gen) / math.sqrt(dim),
            p + 'attention_norm.weight': 0.5 + torch.rand(dim, generator=gen),
            p + 'ffn_norm.weight': 0.5 + torch.rand(dim, generator=gen),
        })
    return state


def hf_permute(weight, heads):
    """Hugging Face's conversion of Meta's q/k rows (``convert_llama_weights_to_hf.py``'s ``permute``)."""
    rows, cols = weight.shape
    return weight.view(heads, rows // heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def to_hf(meta, heads, kv_heads):
    """Meta's layout -> Hugging Face's names, q/k rows permuted for ``rotate_half``."""
    names = {'attention.wq': 'self_attn.q_proj', 'attention.wk': 'self_attn.k_proj', 'attention.wv': 'self_attn.v_proj',
             'attention.wo': 'self_attn.o_proj', 'feed_forward.w1': 'mlp.gate_proj', 'feed_forward.w3': 'mlp.up_proj',
             'feed_forward.w2': 'mlp.down_proj', 'attention_norm': 'input_layernorm',
             'ffn_norm': 'post_attention_layernorm'}
    hf = {'model.embed_tokens.weight': meta['tok_embeddings.weight'], 'model.norm.weight': meta['norm.weight'],
          'lm_head.weight': meta['output.weight']}
    for key, value in meta.items():
        if not key.startswith('layers.'):
            continue
        _, index, *rest = key.split('.')
        module = '.'.join(rest[:-1])
        if module == 'attention.wq':
            value = hf_permute(value, heads)
        elif module == 'attention.wk':
            value = hf_permute(value, kv_heads)
        hf[f'model.layers.{index}.{names[module]}.weight'] = value
    return hf


# --- the oracle: LLaMA's formulas ---------------------------------------------------------------------------------
def llama_frequencies(head_dim):
    """Meta's ``precompute_freqs_cis``: theta^(-2i / head_dim) for pair i."""
    return 1.0 / THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float64)[:head_dim // 2] / head_dim)


def rotate_meta(x, angles):
    """Meta's ``apply_rotary_emb``: interleaved pairs as complex numbers times e^(i angle)."""
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def rotate_hf(x, angles):
    """Hugging Face's ``apply_rotary_pos_emb``: x cos + rotate_half(x) sin, halves for the pairs."""
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


def llama_attention(x, weights, layout, heads, pairs, residual, teacher_heads, teacher_kv_heads, head_dim):
    """LLaMA's causal attention of one layer restricted to ``heads`` (query heads; each takes the key/value head of
    its group), the rotary ``pairs`` within a head (q, k; v and the output projection take the same channels
    ``2i, 2i + 1``) and the ``residual`` channels, rotated by LLaMA's frequencies of those pairs, scaled by
    1/sqrt(the number of q.k terms). ``x``: ``(B, N, len(residual))``."""
    group = teacher_heads // teacher_kv_heads
    channels = [c for p in pairs for c in (2 * p, 2 * p + 1)]
    # Meta: pair i = q/k rows 2i, 2i+1 of a head; Hugging Face: rows i and i + head_dim / 2 (v, o are not permuted)
    rotary = channels if layout == 'meta' else list(pairs) + [p + head_dim // 2 for p in pairs]
    q_rows = [h * head_dim + c for h in heads for c in rotary]
    k_rows = [h // group * head_dim + c for h in heads for c in rotary]
    v_rows = [h // group * head_dim + c for h in heads for c in channels]
    o_cols = [h * head_dim + c for h in heads for c in channels]
    res = torch.tensor(residual)
    wq = weights['wq'][q_rows][:, res]
    wk = weights['wk'][k_rows][:, res]
    wv = weights['wv'][v_rows][:, res]
    batch, tokens, _ = x.shape
    q, k, v = ((x @ w.T).view(batch, tokens, len(heads), -1).transpose(1, 2) for w in (wq, wk, wv))
    angles = torch.arange(tokens, dtype=torch.float64)[:, None] * llama_frequencies(head_dim)[pairs]
    rotate = rotate_meta if layout == 'meta' else rotate_hf
    q, k = rotate(q, angles), rotate(k, angles)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(tokens, tokens, dtype=torch.bool).triu(1), float('-inf'))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, tokens, -1)
    return out @ weights['wo'][res][:, o_cols].T


def llama_ffn(x, weights, hidden, residual):
    """LLaMA's SwiGLU, w2(silu(w1 x) * w3 x), restricted to the ``hidden`` units and ``residual`` channels."""
    res, hid = torch.tensor(residual), torch.tensor(hidden)
    w1, w3, w2 = weights['w1'][hid][:, res], weights['w3'][hid][:, res], weights['w2'][res][:, hid]
    return (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T


def meta_layer(state, layer):
    p = f'layers.{layer}.'
    return {name: state[p + key].double() for name, key in (
        ('wq', 'attention.wq.weight'), ('wk', 'attention.wk.weight'), ('wv', 'attention.wv.weight'),
        ('wo', 'attention.wo.weight'), ('w1', 'feed_forward.w1.weight'), ('w2', 'feed_forward.w2.weight'),
        ('w3', 'feed_forward.w3.weight'))}


def hf_layer(state, layer):
    p = f'model.layers.{layer}.'
    return {name: state[p + key].double() for name, key in (
        ('wq', 'self_attn.q_proj.weight'), ('wk', 'self_attn.k_proj.weight'), ('wv', 'self_attn.v_proj.weight'),
        ('wo', 'self_attn.o_proj.weight'), ('w1', 'mlp.gate_proj.weight'), ('w2', 'mlp.down_proj.weight'),
        ('w3', 'mlp.up_proj.weight'))}


# --- fixtures -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
    """The synthetic LLaMA in Meta's layout (``consolidated.00.pth`` + ``params.json``) and in Hugging Face's, as a
    torch state dict (``pytorch_model.bin``) and as ``model.safetensors``, each with a ``config.json``."""
    root = tmp_path_factory.mktemp('llama')
    meta = meta_llama(**TEACHER)
    meta_dir, hf_dir, st_dir = root / 'meta', root / 'hf', root / 'hf_safetensors'
    for folder in (meta_dir, hf_dir, st_dir):
        folder.mkdir()
    torch.save({k: v.half() for k, v in meta.items()}, meta_dir / 'consolidated.00.pth')
    (meta_dir / 'params.json').write_text('{"dim": 112, "n_heads": 7, "n_layers": 5, "norm_eps": 1e-05}')
    hf = to_hf(meta, TEACHER['heads'], TEACHER['kv_heads'])
    torch.save({k: v.half() for k, v in hf.items()}, hf_dir / 'pytorch_model.bin')
    save_file({k: v.half().contiguous() for k, v in hf.items()}, str(st_dir / 'model.safetensors'))
    for folder in (hf_dir, st_dir):
        (folder / 'config.json').write_text('{"hidden_size": 112, "num_attention_heads": 7}')
    return dict(meta=(meta_dir, {k: v.half() for k, v in meta.items()}),
                hf=(hf_dir, {k: v.half() for k, v in hf.items()}),
                hf_safetensors=(st_dir, {k: v.half() for k, v in hf.items()}))


def _converted(folder, **kwargs):
    state, plan = convert_llama2illama(read_llama_checkpoint(str(folder)), STUDENT, img_size=32, patch_size=8,
                                       mask_mode='causal', **kwargs)
    model = ILLaMA(arch=STUDENT, img_size=32, patch_size=8, mask_mode='causal')
    model.load_state_dict({k[len('backbone.'):]: v for k, v in state.items()}, strict=True)
    return state, plan, model.double().eval()


# --- tests ----------------------------------------------------------------------------------------------------------
def test_select_indices_is_the_uniform_rule():
    assert select_indices(128, 64) == list(range(0, 128, 2))  # divides: every 2nd from 0
    assert select_indices(4096, 192)[:3] == [0, 21, 43] and select_indices(4096, 192)[-1] == 4095  # rounded linspace
    assert select_indices(32, 12, 'first') == list(range(12))
    with pytest.raises(LlamaCheckpointError):
        select_indices(3, 4)


@pytest.mark.parametrize('layout', ['meta', 'hf', 'hf_safetensors'])
def test_selected_rows_and_layers(checkpoints, layout):
    folder, raw = checkpoints[layout]
    state, plan, _ = _converted(folder)
    assert (plan['layers'], plan['residual'], plan['heads'], plan['pairs'], plan['hidden']) == \
        ([0, 1], RESIDUAL, HEADS, PAIRS, HIDDEN)
    meta = checkpoints['meta'][1]
    res, hid = torch.tensor(RESIDUAL), torch.tensor(HIDDEN)
    for block, layer in enumerate(plan['layers']):
        ours, theirs = f'backbone.layers.{block}.', f'layers.{layer}.'
        assert torch.equal(state[ours + 'norm1.weight'], meta[theirs + 'attention_norm.weight'][res].float())
        assert torch.equal(state[ours + 'norm2.weight'], meta[theirs + 'ffn_norm.weight'][res].float())
        gate, up = state[ours + 'ffn.w12.weight'].split(40)
        assert torch.equal(gate, meta[theirs + 'feed_forward.w1.weight'][hid][:, res].float())
        assert torch.equal(up, meta[theirs + 'feed_forward.w3.weight'][hid][:, res].float())
        assert torch.equal(state[ours + 'ffn.w3.weight'], meta[theirs + 'feed_forward.w2.weight'][res][:, hid].float())
        q_rows = [h * 16 + c for h in HEADS for p in PAIRS for c in (2 * p, 2 * p + 1)]  # Meta's order
        q = state[ours + 'attn.qkv.weight'][:24]
        assert torch.equal(q, meta[theirs + 'attention.wq.weight'][q_rows][:, res].float())
        assert not state[ours + 'attn.qkv.bias'].any() and not state[ours + 'attn.proj.bias'].any()
    assert state['backbone.patch_embed.projection.weight'].shape == (24, 3, 8, 8)  # left to its init


def test_layer_selection_uniform_and_element_selection_first(checkpoints):
    folder, _ = checkpoints['meta']
    _, plan, _ = _converted(folder, layers='uniform', elements='first')
    assert plan['layers'] == [0, 4]
    assert (plan['residual'], plan['heads'], plan['pairs']) == (list(range(24)), [0, 1, 2], [0, 1, 2, 3])


@pytest.mark.parametrize('layout', ['meta', 'hf', 'hf_safetensors'])
def test_attention_and_swiglu_equal_llama_restricted_to_the_selection(checkpoints, layout):
    folder, raw = checkpoints[layout]
    _, plan, model = _converted(folder)
    x = torch.randn(2, 9, 24, dtype=torch.float64)
    angles = model.rope.angles(torch.arange(9)).double()
    for block, layer in enumerate(plan['layers']):
        weights = meta_layer(raw, layer) if layout == 'meta' else hf_layer(raw, layer)
        expected = llama_attention(x, weights, 'meta' if layout == 'meta' else 'hf', HEADS, PAIRS, RESIDUAL, 7, 7, 16)
        with torch.no_grad():
            got = model.layers[block].attn.attend(x, angles)
            ffn = model.layers[block].ffn(x)
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)  # fp32 frequency tables
        torch.testing.assert_close(ffn, llama_ffn(x, weights, HIDDEN, RESIDUAL), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('layout', ['hf', 'hf_safetensors'])
def test_meta_and_hf_layouts_give_the_same_weights(checkpoints, layout):
    meta_state, _, _ = _converted(checkpoints['meta'][0])
    hf_state, _, _ = _converted(checkpoints[layout][0])
    assert meta_state.keys() == hf_state.keys()
    assert all(torch.equal(meta_state[k], hf_state[k]) for k in meta_state)


def test_meta_model_parallel_shards_are_merged(checkpoints, tmp_path):
    """Two ``consolidated.NN.pth`` shards (q/k/v, gate, up split by rows; output and down projections by columns;
    norms whole in both) convert as the single file does."""
    meta = checkpoints['meta'][1]
    shards = [{}, {}]
    for key, value in meta.items():
        name = key.split('.')[-2]
        dim = {'wq': 0, 'wk': 0, 'wv': 0, 'w1': 0, 'w3': 0, 'output': 0, 'wo': 1, 'w2': 1,
               'tok_embeddings': 1}.get(name)
        for shard, part in zip(shards, [value] * 2 if dim is None else value.chunk(2, dim)):
            shard[key] = part.clone()
    for index, shard in enumerate(shards):
        torch.save(shard, tmp_path / f'consolidated.0{index}.pth')
    (tmp_path / 'params.json').write_text('{"n_heads": 7}')
    merged, _, _ = _converted(tmp_path)
    single, _, _ = _converted(checkpoints['meta'][0])
    assert all(torch.equal(merged[k], single[k]) for k in single)


def test_grouped_query_attention_takes_each_heads_key_value_group(tmp_path):
    """8 query heads sharing 2 key/value heads: the selected query heads 0, 2, 4, 6 use key/value heads 0, 0, 1, 1."""
    meta = meta_llama(dim=128, heads=8, kv_heads=2, hidden=96, layers=2, seed=1)
    torch.save(meta, tmp_path / 'consolidated.00.pth')
    student = dict(embed_dims=32, num_layers=1, num_heads=4, ffn_hidden_dims=32)
    state, plan = convert_llama2illama(read_llama_checkpoint(str(tmp_path), num_heads=8), student, img_size=32,
                                       patch_size=8, mask_mode='causal')
    assert plan['heads'] == [0, 2, 4, 6] and plan['kv_rows'][::8] == [0, 0, 16, 16]
    model = ILLaMA(arch=student, img_size=32, patch_size=8, mask_mode='causal')
    model.load_state_dict({k[len('backbone.'):]: v for k, v in state.items()}, strict=True)
    model = model.double().eval()
    x = torch.randn(1, 6, 32, dtype=torch.float64)
    with torch.no_grad():
        got = model.layers[0].attn.attend(x, model.rope.angles(torch.arange(6)).double())
    expected = llama_attention(x, meta_layer(meta, 0), 'meta', plan['heads'], plan['pairs'], plan['residual'], 8, 2,
                               16)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)  # fp32 frequency tables


def test_too_small_a_llama_is_refused(checkpoints):
    with pytest.raises(LlamaCheckpointError, match='smaller than the iLLaMA'):
        convert_llama2illama(read_llama_checkpoint(str(checkpoints['meta'][0])), 'tiny')


def test_safetensors_are_read_lazily(checkpoints):
    """Only the selected layers' tensors leave the file: not the embeddings, the language head or layers 2-4."""
    source = read_llama_checkpoint(str(checkpoints['hf_safetensors'][0] / 'model.safetensors'))
    assert (source.layout, source.num_layers, source.num_heads) == ('hf', 5, 7)
    read, fetch = [], source._fetch
    source._fetch = lambda key: read.append(key) or fetch(key)
    convert_llama2illama(source, STUDENT, img_size=32, patch_size=8, mask_mode='causal')
    assert read and all(key.startswith(('model.layers.0.', 'model.layers.1.')) for key in read)


def test_safetensors_need_their_package(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'safetensors', None)
    path = tmp_path / 'model.safetensors'
    path.write_bytes(b'\0' * 16)
    with pytest.raises(LlamaCheckpointError, match='pip install safetensors'):
        read_llama_checkpoint(str(path))


def test_cli_converts_a_meta_checkpoint_for_illama_tiny(tmp_path):
    """Through the tool: a 14-layer LLaMA of width 192 (3 heads of 64; params.json) -> iLLaMA-T, whose file loads
    strictly into an iLLaMA-T backbone; a missing source ends in one line."""
    torch.save({k: v.half() for k, v in meta_llama(dim=192, heads=3, kv_heads=3, hidden=512, layers=14).items()},
               tmp_path / 'consolidated.00.pth')
    (tmp_path / 'params.json').write_text('{"dim": 192, "n_heads": 3, "n_layers": 14}')
    dst = tmp_path / 'illama-tiny_llama2-ws.pth'
    result = run_python([sys.executable, str(CONVERTER), str(tmp_path), str(dst), '--arch', 'tiny', '--layers',
                         'uniform'], cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert 'LLaMA (meta layout): 14 layers, 3 heads of 64' in result.stdout
    checkpoint = torch.load(dst, weights_only=True)
    assert checkpoint['meta']['weight_selection']['layers'] == [0, 1, 2, 4, 5, 6, 7, 8, 9, 11, 12, 13]
    model = ILLaMA(arch='tiny', img_size=224, mask_mode='official')
    model.load_state_dict({k[len('backbone.'):]: v for k, v in checkpoint['state_dict'].items()}, strict=True)

    missing = run_python([sys.executable, str(CONVERTER), str(tmp_path / 'none.pth'), str(dst), '--arch', 'tiny'],
                         cwd=ROOT, timeout=300)
    assert missing.returncode == 1 and missing.stderr.strip().splitlines() == [
        f"llama2illama: {str(tmp_path / 'none.pth')!r} does not exist."]


def test_cli_converts_a_hugging_face_safetensors_checkpoint_for_illama_tiny(tmp_path):
    """Through the tool: the same 14-layer LLaMA in Hugging Face's layout, as ``model.safetensors`` with its
    ``config.json``, gives the weights of its Meta layout, and the file loads strictly into an iLLaMA-T backbone."""
    meta = {k: v.half() for k, v in meta_llama(dim=192, heads=3, kv_heads=3, hidden=512, layers=14).items()}
    save_file({k: v.contiguous() for k, v in to_hf(meta, 3, 3).items()}, str(tmp_path / 'model.safetensors'))
    (tmp_path / 'config.json').write_text('{"hidden_size": 192, "num_attention_heads": 3}')
    dst = tmp_path / 'illama-tiny_llama2-ws.pth'
    result = run_python([sys.executable, str(CONVERTER), str(tmp_path / 'model.safetensors'), str(dst), '--arch',
                         'tiny'], cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert 'LLaMA (hf layout): 14 layers, 3 heads of 64' in result.stdout
    state = torch.load(dst, weights_only=True)['state_dict']
    model = ILLaMA(arch='tiny', img_size=224, mask_mode='official')
    model.load_state_dict({k[len('backbone.'):]: v for k, v in state.items()}, strict=True)
    meta_dir = tmp_path / 'meta'
    meta_dir.mkdir()
    torch.save(meta, meta_dir / 'consolidated.00.pth')
    expected, _ = convert_llama2illama(read_llama_checkpoint(str(meta_dir), num_heads=3), 'tiny')
    assert state.keys() == expected.keys() and all(torch.equal(state[k], expected[k]) for k in expected)
