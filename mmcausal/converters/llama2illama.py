"""LLaMA-2 checkpoint -> an iLLaMA initialisation by weight selection (paper App. I, Table 18, Fig. 9).

The paper initialises iLLaMA-T/S/B from LLaMA2-7B with *weight selection* (Xu et al. 2023, "Initializing Models
with Larger Ones"): each block of the small model takes a subset of the weights of one block of the large one,
then trains with the from-scratch recipe (Table 18: 74.5 / 79.9 / 81.4 against 75.0 / 79.9 / 81.6 without).

**Layer selection.** ``'first'`` (default): iLLaMA block ``i`` <- LLaMA layer ``i`` for ``i < depth``, the first-N
selection of Xu et al. and what App. I's runs did (the official
https://github.com/techmonsterwang/iLLaMA/blob/dfc93b97/llama2/weight_selection.py copies LLaMA layers 0-11 into
the 12 blocks). ``'uniform'``: layers ``round(linspace(0, L - 1, depth))``.

**Element selection.** One rule per dimension, and one index set per dimension wherever it occurs, so the
selected weights still compose (Xu et al.'s consistency):

* the residual stream ``D_llama -> D``: the same channels in every input column (q/k/v, SwiGLU gate/up), output
  row (attention output, SwiGLU down) and RMSNorm weight of every block;
* the attention heads ``H_llama -> H``, and within a head the rotary channel *pairs* ``hd_llama / 2 -> hd / 2``
  (q, k, v and the output projection's columns take the same heads and pairs, so the selected q.k products and
  head outputs are sums over a subset of LLaMA's; with grouped-query attention a selected query head takes the
  key / value head of its group);
* the SwiGLU hidden units ``F_llama -> F`` (the gate and up rows and the down columns).

``'uniform'`` (default, the official script's ``uniform_element_selection``): every ``n / k``-th index
from 0 when ``k`` divides ``n``, else ``round(linspace(0, n - 1, k))``. ``'first'``: the first ``k``. With
``'uniform'`` and iLLaMA's 64-channel heads taken from LLaMA-2's 128-channel ones, every 2nd pair is kept, whose
RoPE frequency ``theta^(-2 * 2i / 128)`` is exactly iLLaMA's ``theta^(-2i / 64)`` (both theta = 10000): each kept
head is LLaMA's head restricted to those pairs, rotations included. The official script selects over the fused
q/k/v rows without regard to heads or to the RoPE layout (its rows stay within q, k and v, its heads do not).

**RoPE layout.** Meta's ``consolidated.*.pth`` files rotate interleaved pairs ``(x[2i], x[2i+1])``, as iLLaMA does
(:func:`mmcausal.models.layers.position.apply_rotary`); Hugging Face's checkpoints permute the q / k rows of each
head to the half-split layout of ``rotate_half`` (pair ``i`` = rows ``i`` and ``i + hd / 2``). The HF rows are put
back into Meta's order (the inverse of the conversion script's permutation) before the selection.

**Left to their init.** Patch embedding, class token, position table, the final RMSNorm (LLaMA's sits before its
language head) and the classification head are not selected; LLaMA has no biases, so the q/k/v and output biases are
0 (iLLaMA's init too). The output holds the whole backbone (``backbone.*`` keys, a freshly initialised ``ILLaMA``,
seeded, for the unselected parts) so it loads strictly, e.g. as a config's ``Pretrained`` init with
``prefix='backbone.'``; the head keeps the classifier's init.

Sources (file or folder): Meta's layout (``layers.{i}.attention.wq.weight``, ``feed_forward.w1/w2/w3``,
``attention_norm``, ``ffn_norm``; a folder's ``consolidated.*.pth`` model-parallel shards are merged, ``params.json``
gives the heads) and Hugging Face's (``model.layers.{i}.self_attn.q_proj.weight``, ``mlp.gate_proj/up_proj/down_proj``,
``input_layernorm``, ``post_attention_layernorm``) in ``*.safetensors`` (read lazily, only the tensors selected;
needs the ``safetensors`` package) or ``*.bin`` / ``*.pth`` files, ``config.json`` giving the heads. Torch files are
read with mmcausal's weights-only loader (:func:`mmcausal.utils.load_checkpoint_file`), whole: a 7B ``.pth`` needs
its size in memory (13.5 GB in fp16).
"""
import glob
import json
import logging
import os.path as osp
import re
from functools import partial
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.logging import MMLogger
from torch import Tensor

from mmcausal.models.illama import ILLaMA
from mmcausal.models.layers import resolve_arch, swiglu_hidden_dims
from mmcausal.utils import UserInputError, load_checkpoint_file

LAYER_SELECTIONS = ('first', 'uniform')
ELEMENT_SELECTIONS = ('uniform', 'first')
#: head width of every LLaMA-2 size (7B: 32 x 128, 13B: 40 x 128, 70B: 64 x 128), used when no params / config file
#: says how many heads there are
LLAMA_HEAD_DIM = 128

# Per layer: our name -> (Meta key, Hugging Face key) after ``layers.{i}.`` / ``model.layers.{i}.``.
_LAYER_KEYS = {
    'wq': ('attention.wq.weight', 'self_attn.q_proj.weight'),
    'wk': ('attention.wk.weight', 'self_attn.k_proj.weight'),
    'wv': ('attention.wv.weight', 'self_attn.v_proj.weight'),
    'wo': ('attention.wo.weight', 'self_attn.o_proj.weight'),
    'w1': ('feed_forward.w1.weight', 'mlp.gate_proj.weight'),
    'w3': ('feed_forward.w3.weight', 'mlp.up_proj.weight'),
    'w2': ('feed_forward.w2.weight', 'mlp.down_proj.weight'),
    'attention_norm': ('attention_norm.weight', 'input_layernorm.weight'),
    'ffn_norm': ('ffn_norm.weight', 'post_attention_layernorm.weight'),
}
_LAYER_PREFIX = {'meta': 'layers.', 'hf': 'model.layers.'}
# Meta's model-parallel shards: the dimension each weight is split along (column-parallel 0, row-parallel 1);
# the norms are whole in every shard.
_SHARD_DIM = {'wq': 0, 'wk': 0, 'wv': 0, 'w1': 0, 'w3': 0, 'output': 0, 'wo': 1, 'w2': 1, 'tok_embeddings': 1}


class LlamaCheckpointError(UserInputError, ValueError):
    """The source is not a LLaMA checkpoint this converter reads, or it is too small for the requested iLLaMA."""


# ---------------------------------------------------------------------------------------------- reading
class LlamaSource:
    """The tensors of a LLaMA checkpoint by key (loaded on demand from safetensors files, at once from torch files),
    its layout (``'meta'`` / ``'hf'``), number of layers and heads."""

    def __init__(self, keys: Sequence[str], fetch: Callable[[str], Tensor], num_heads: Optional[int] = None) -> None:
        self.keys = list(keys)
        self._key_set = set(self.keys)
        self._fetch = fetch
        layout = ('meta' if any(k.startswith('layers.') and '.attention.wq.' in k for k in self.keys) else
                  'hf' if any(k.startswith('model.layers.') and '.self_attn.q_proj.' in k for k in self.keys) else None)
        if layout is None:
            shown = ', '.join(self.keys[:4]) or 'none'
            raise LlamaCheckpointError(f'No LLaMA attention weights found (keys such as layers.0.attention.wq.weight '
                                       f'or model.layers.0.self_attn.q_proj.weight); the file holds {shown} ...')
        self.layout = layout
        pattern = re.compile(re.escape(_LAYER_PREFIX[layout]) + r'(\d+)\.')
        self.num_layers = 1 + max(int(m.group(1)) for m in map(pattern.match, self.keys) if m)
        dim = self.shape(0, 'wq')[1]
        self.num_heads = num_heads or dim // LLAMA_HEAD_DIM
        if self.num_heads < 1 or dim % self.num_heads or (dim // self.num_heads) % 2:
            raise LlamaCheckpointError(f'Cannot split the width {dim} into {self.num_heads} heads of an even width; '
                                       'give the number of heads (--num-heads).')
        self.head_dim = dim // self.num_heads
        self.num_kv_heads = self.shape(0, 'wk')[0] // self.head_dim
        if self.num_kv_heads < 1 or self.num_heads % self.num_kv_heads:
            raise LlamaCheckpointError(f'{self.num_heads} query heads do not share {self.num_kv_heads} key/value '
                                       'heads evenly; is the number of heads right (--num-heads)?')

    def _raw(self, layer: int, name: str) -> Tensor:
        """Layer ``layer``'s weight ``name`` (a key of ``_LAYER_KEYS``) as stored."""
        key = _LAYER_PREFIX[self.layout] + f'{layer}.' + _LAYER_KEYS[name][self.layout == 'hf']
        if key not in self._key_set:
            raise LlamaCheckpointError(f'The checkpoint has no {key!r}.')
        return self._fetch(key)

    def shape(self, layer: int, name: str) -> Tuple[int, ...]:
        """The shape of layer ``layer``'s weight ``name``."""
        return tuple(self._raw(layer, name).shape)

    def tensor(self, layer: int, name: str) -> Tensor:
        """Layer ``layer``'s weight ``name`` (a key of ``_LAYER_KEYS``) in Meta's row order, as float32."""
        value = self._raw(layer, name).float()
        if self.layout == 'hf' and name in ('wq', 'wk'):
            value = unpermute_rotary_rows(value, self.head_dim)
        return value


def unpermute_rotary_rows(weight: Tensor, head_dim: int) -> Tensor:
    """Hugging Face q/k rows (per head: the first rotary coordinate of every pair, then the second, for
    ``rotate_half``) -> Meta's interleaved rows (per head: pair ``i`` = rows ``2i, 2i + 1``)."""
    out_dims, in_dims = weight.shape
    return weight.view(out_dims // head_dim, 2, head_dim // 2, in_dims).transpose(1, 2).reshape(out_dims, in_dims)


def _merge_meta_shards(shards: List[Dict[str, Tensor]]) -> Dict[str, Tensor]:
    """Meta's model-parallel ``consolidated.NN.pth`` shards -> one state dict."""
    if len(shards) == 1:
        return shards[0]
    merged = {}
    for key, value in shards[0].items():
        name = key.split('.')[-2] if key.endswith('.weight') else key
        dim = _SHARD_DIM.get(name)
        merged[key] = value if dim is None or value.dim() < 2 else torch.cat([s[key] for s in shards], dim=dim)
    return merged


def _torch_files(paths: Sequence[str]) -> Dict[str, Tensor]:
    state = {}
    for path in paths:
        loaded = load_checkpoint_file(path, map_location='cpu')
        if isinstance(loaded, dict) and isinstance(loaded.get('model'), dict):
            loaded = loaded['model']
        if not isinstance(loaded, dict):
            raise LlamaCheckpointError(f'{path!r} is not a state dict.')
        state.update({k: v for k, v in loaded.items() if isinstance(v, Tensor)})
    return state


def _safetensors_source(paths: Sequence[str]) -> Tuple[List[str], Callable[[str], Tensor]]:
    try:
        from safetensors import safe_open
    except ImportError:
        raise LlamaCheckpointError('Reading .safetensors needs the safetensors package: pip install safetensors '
                                   '(or convert the files to a torch state dict).') from None
    where = {}
    for path in paths:
        with safe_open(path, framework='pt') as file:
            where.update({key: path for key in file.keys()})

    def fetch(key: str) -> Tensor:
        with safe_open(where[key], framework='pt') as file:
            return file.get_tensor(key)

    return list(where), fetch


def _heads_from_json(folder: str) -> Optional[int]:
    """The number of attention heads in Meta's ``params.json`` or Hugging Face's ``config.json`` of ``folder``."""
    for name, key in (('params.json', 'n_heads'), ('config.json', 'num_attention_heads')):
        path = osp.join(folder, name)
        if osp.isfile(path):
            with open(path, encoding='utf-8') as file:
                value = json.load(file).get(key)
            if value:
                return int(value)
    return None


def read_llama_checkpoint(path: str, num_heads: Optional[int] = None) -> LlamaSource:
    """Open a LLaMA checkpoint: a ``.pth`` / ``.bin`` / ``.safetensors`` file or a folder of them (Meta's
    ``consolidated.*.pth`` shards; Hugging Face's ``*.safetensors`` or ``pytorch_model*.bin``). ``num_heads``:
    given, or read from ``params.json`` / ``config.json`` beside the files, else width / 128."""
    if osp.isdir(path):
        folder = path
        patterns = ('consolidated.*.pth', '*.safetensors', '*.bin', '*.pth')  # the first that matches
        files = next((found for found in (sorted(glob.glob(osp.join(path, p))) for p in patterns) if found), [])
        if not files:
            raise LlamaCheckpointError(f'{path!r} holds no consolidated.*.pth, *.safetensors, *.bin or *.pth file.')
    elif osp.isfile(path):
        folder, files = osp.dirname(path), [path]
    else:
        raise LlamaCheckpointError(f'{path!r} does not exist.')
    num_heads = num_heads or _heads_from_json(folder)
    if files[0].endswith('.safetensors'):
        keys, fetch = _safetensors_source(files)
        return LlamaSource(keys, fetch, num_heads)
    if osp.basename(files[0]).startswith('consolidated.'):
        state = _merge_meta_shards([_torch_files([file]) for file in files])
    else:
        state = _torch_files(files)
    return LlamaSource(list(state), state.__getitem__, num_heads)


# ---------------------------------------------------------------------------------------------- selection
def select_indices(total: int, count: int, rule: str = 'uniform') -> List[int]:
    """``count`` of ``range(total)``: ``'uniform'`` every ``total // count``-th from 0 when ``count`` divides
    ``total``, else ``round(linspace(0, total - 1, count))``; ``'first'`` the first ``count``."""
    if not 0 < count <= total:
        raise LlamaCheckpointError(f'Cannot select {count} of {total}.')
    if rule == 'first':
        return list(range(count))
    if rule != 'uniform':
        raise LlamaCheckpointError(f'Unknown selection {rule!r}; choose one of {ELEMENT_SELECTIONS}.')
    if total % count == 0:
        return list(range(0, total, total // count))
    return [int(i) for i in torch.linspace(0, total - 1, count, dtype=torch.float64).round().long()]


def target_arch(arch: Union[str, dict]) -> dict:
    """``embed_dims``, ``num_layers``, ``num_heads`` and ``ffn_hidden_dims`` of an ``ILLaMA`` arch name or dict."""
    setting = resolve_arch(arch, ILLaMA.arch_zoo, ('embed_dims', 'num_layers', 'num_heads'))
    setting.setdefault('ffn_hidden_dims', swiglu_hidden_dims(setting['embed_dims']))
    return setting


def selection_plan(source: LlamaSource, arch: Union[str, dict], layers: str = 'first',
                   elements: str = 'uniform') -> Dict[str, List[int]]:
    """The indices taken from ``source`` for ``arch``: ``layers``, ``residual`` channels, query ``heads``, rotary
    ``pairs`` within a head, ``hidden`` SwiGLU units, and the derived ``q_rows`` / ``kv_rows`` (rows of LLaMA's
    q and k / v projections, Meta's layout, in iLLaMA's head-major order; also the output projection's columns for
    ``q_rows``)."""
    target = target_arch(arch)
    width, depth, heads = target['embed_dims'], target['num_layers'], target['num_heads']
    head_dim = width // heads
    dim, hidden = source.shape(0, 'wq')[1], source.shape(0, 'w1')[0]
    needs = dict(layers=(source.num_layers, depth), width=(dim, width), heads=(source.num_heads, heads),
                 head_dim=(source.head_dim, head_dim), hidden=(hidden, target['ffn_hidden_dims']))
    small = [f'{name} {have} < {want}' for name, (have, want) in needs.items() if have < want]
    if small or head_dim % 2:
        raise LlamaCheckpointError(f'The LLaMA checkpoint is smaller than the iLLaMA to initialise ({", ".join(small)}'
                                   f'{"; odd head width" if head_dim % 2 else ""}).')
    if layers not in LAYER_SELECTIONS:
        raise LlamaCheckpointError(f'Unknown layer selection {layers!r}; choose one of {LAYER_SELECTIONS}.')
    plan = dict(layers=select_indices(source.num_layers, depth, 'first' if layers == 'first' else 'uniform'),
                residual=select_indices(dim, width, elements),
                heads=select_indices(source.num_heads, heads, elements),
                pairs=select_indices(source.head_dim // 2, head_dim // 2, elements),
                hidden=select_indices(hidden, target['ffn_hidden_dims'], elements))
    channels = [c for pair in plan['pairs'] for c in (2 * pair, 2 * pair + 1)]
    group = source.num_heads // source.num_kv_heads
    plan['q_rows'] = [head * source.head_dim + c for head in plan['heads'] for c in channels]
    plan['kv_rows'] = [head // group * source.head_dim + c for head in plan['heads'] for c in channels]
    return plan


def convert_llama2illama(source: LlamaSource, arch: Union[str, dict], layers: str = 'first',
                         elements: str = 'uniform', img_size: int = 224, patch_size: int = 16,
                         mask_mode: str = 'official', seed: int = 0) -> Tuple[Dict[str, Tensor], dict]:
    """Weight selection from ``source`` into an ``ILLaMA(arch)`` (module docstring).

    Returns:
        The backbone's state dict under ``backbone.`` (every key: the selected blocks, the rest a fresh init drawn
        with ``seed``; ``mask_mode`` recorded) and the plan (:func:`selection_plan`).
    """
    plan = selection_plan(source, arch, layers, elements)
    torch.manual_seed(seed)
    # init_cfg=[]: the backbone's TruncNormal init of the Linear layers is skipped, since every Linear sits in a
    # block and is replaced below; init_weights still draws the class token and position table (TruncNormal 0.02)
    model = ILLaMA(arch=target_arch(arch), img_size=img_size, patch_size=patch_size, mask_mode=mask_mode,
                   init_cfg=[])
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)  # mmengine reports every parameter's init at INFO
    try:
        model.init_weights()
    finally:
        logger.setLevel(level)
    state = model.state_dict()
    res, hid = torch.tensor(plan['residual']), torch.tensor(plan['hidden'])
    q_rows, kv_rows = torch.tensor(plan['q_rows']), torch.tensor(plan['kv_rows'])
    for block, layer in enumerate(plan['layers']):
        take = partial(_take, source, layer)
        ours = f'layers.{block}.'
        updates = {
            'norm1.weight': take('attention_norm', res),
            'attn.qkv.weight': torch.cat([take('wq', q_rows, res), take('wk', kv_rows, res), take('wv', kv_rows, res)]),
            'attn.proj.weight': take('wo', res, q_rows),
            'norm2.weight': take('ffn_norm', res),
            'ffn.w12.weight': torch.cat([take('w1', hid, res), take('w3', hid, res)]),  # [gate; up]
            'ffn.w3.weight': take('w2', res, hid),
        }
        for name, value in updates.items():
            if state[ours + name].shape != value.shape:  # a mistake here, never a user's: fail loudly
                raise AssertionError(f'{ours + name}: selected {tuple(value.shape)}, '
                                     f'model has {tuple(state[ours + name].shape)}')
            state[ours + name] = value.to(state[ours + name].dtype).contiguous()
        for bias in ('attn.qkv.bias', 'attn.proj.bias'):  # LLaMA has none
            if ours + bias in state:
                state[ours + bias] = torch.zeros_like(state[ours + bias])
    return {f'backbone.{key}': value for key, value in state.items()}, plan


def _take(source: LlamaSource, layer: int, name: str, rows: Optional[Tensor] = None,
          cols: Optional[Tensor] = None) -> Tensor:
    """Rows ``rows`` and columns ``cols`` (all where None) of layer ``layer``'s weight ``name``."""
    weight = source.tensor(layer, name)
    weight = weight if rows is None else weight.index_select(0, rows)
    return weight if cols is None else weight.index_select(1, cols)


def describe_selection(source: LlamaSource, plan: Dict[str, List[int]]) -> str:
    """One line per selected dimension, for the converter's report."""
    def span(indices: List[int]) -> str:
        return str(indices) if len(indices) <= 8 else f'{len(indices)} of them: {indices[:4]} ... {indices[-2:]}'

    return '\n'.join([
        f'LLaMA ({source.layout} layout): {source.num_layers} layers, {source.num_heads} heads of {source.head_dim} '
        f'({source.num_kv_heads} key/value heads)',
        f'  layers   {span(plan["layers"])}',
        f'  residual {span(plan["residual"])}',
        f'  heads    {span(plan["heads"])}',
        f'  pairs    {span(plan["pairs"])}',
        f'  hidden   {span(plan["hidden"])}',
    ])
