"""iLLaMA: a LLaMA-style decoder as a vision transformer (Wang et al. 2024, "Adapting LLaMA Decoder to
Vision Transformer").

Sequence: ``[patch_1 .. patch_N, cls]`` (post-sequence class token, Sec. 3.3) + a learnable absolute
position embedding over all ``N + 1`` tokens (cls row last), RoPE on q/k with positions ``0..N`` (cls at
``N``), then ``depth`` pre-norm blocks of RMSNorm -> attention -> RMSNorm -> SwiGLU. The soft mask
(Eq. 2) mixes causal and bidirectional attention with the runtime rate ``soft_mask_rate``.

Every LLaMA part is also a switch back to its ViT counterpart (``ffn_type``, ``norm_cfg``, ``mask_mode``,
``cls_position``, ``use_rope``, ``use_pos_embed``), so one class builds each rung of the paper's "LLaMAfication"
ladder (Table 17, Sec. 3.1-3.4), from ViT-T/16 and ViT-B/16 (GELU MLP, LayerNorm, bidirectional attention, class
token first, learnable position embedding) to iLLaMA. The defaults are iLLaMA.
"""
from functools import partial
from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.validation import check_choice
from ..layers import (
    CLS_POSITIONS,
    BackboneConfigError,
    GridRoPE,
    MaskedAttentionMixin,
    PlainBackbone,
    SelfAttention,
    SwiGLUFFN,
    TokenLayout,
    TransformerBlock,
    build_norm_layer,
    check_head_split,
    check_image_batch,
    gelu_mlp,
    insert_cls_token,
    resize_pos_embed,
    resolve_arch,
    swiglu_hidden_dims,
)
from .quantization import quantize_blocks

FFN_TYPES = ('swiglu', 'gelu')


@MODELS.register_module()
class ILLaMA(MaskedAttentionMixin, PlainBackbone):
    """iLLaMA backbone.

    Args:
        arch: ``'tiny' | 'small' | 'base' | 'large'`` (or ``t/s/b/l``), or a dict with ``embed_dims``,
            ``num_layers``, ``num_heads`` (optional ``ffn_hidden_dims``, the FFN's hidden width).
        img_size: training resolution; sets the stored position-embedding grid (``img_size / 16``).
            Any input size is accepted at run time: the image is zero-padded at the bottom/right to a
            multiple of ``patch_size`` (mmcv ``PatchEmbed``, ``padding='corner'``), the patch grid is
            ``ceil(H/16) x ceil(W/16)``, the position table is resized (bicubic) to it and RoPE covers the
            actual sequence length.
        mask_mode: ``'causal'`` (default; strict, SDPA fast path), ``'official'`` (the released weights'
            post-softmax soft mask, paper Eq. 2) or ``'bidirectional'``. See :mod:`mmcausal.models.layers.attention`.
        soft_mask_rate: initial ``alpha``; training schedules set it with ``SoftMaskHook``.
        out_indices: blocks whose output is returned (negative indices allowed).
        out_type: ``'raw'`` (B, N+1, D) all tokens in sequence order (cls at ``cls_position``); ``'cls_token'`` (B, D);
            ``'featmap'`` (B, D, H/16, W/16) without cls; ``'avg_featmap'`` (B, D) mean of patch tokens.
        final_norm: apply the final norm (``norm_cfg``) to the last block's output.
        drop_rate: dropout after adding the position embedding.
        drop_path_rate: stochastic depth, linear from 0 (first block) to this value (last block).
        frozen_stages: freeze the stem (patch/pos/cls) and the first ``frozen_stages`` blocks; -1 = none.
        with_cp: gradient checkpointing of every block (recomputes activations in the backward pass: same
            gradients, far less memory).
        ffn_type: ``'swiglu'`` (default; LLaMA's bias-free gated FFN, hidden ``swiglu_hidden_dims(D)``) or
            ``'gelu'`` (ViT's MLP ``fc2(GELU(fc1(x)))`` with biases, hidden ``4 * D``), paper Sec. 3.1.
        norm_cfg: every norm of the blocks and the final norm; default ``dict(type='RMSNorm', eps=1e-6)``,
            ``dict(type='LN', eps=1e-6)`` is ViT's LayerNorm (Sec. 3.2).
        cls_position: ``'last'`` (default; the post-sequence class token, Sec. 3.3) or ``'first'`` (ViT's slot;
            under a causal mask the class token then sees only itself: the attention collapse of Table 1).
        use_rope: 1D RoPE on q/k (Sec. 3.4); False leaves q/k unrotated.
        use_pos_embed: the learnable absolute position table (``pos_embed``); False builds none (the RoPE-only
            rung of Table 17), so the state dict has no ``pos_embed`` key.
        qat: quantization-aware training, e.g. ``dict(bits=8)``: every block's attention and FFN linear layers
            fake-quantize their weights and inputs with learnable step sizes (:mod:`.quantization`, paper Sec. 4.4);
            None (default) builds the full-precision model.
        qkv_bias, rope_theta, patch_size, in_channels: as named.
    """
    arch_zoo = {
        ('t', 'tiny'): dict(embed_dims=192, num_layers=12, num_heads=3),
        ('s', 'small'): dict(embed_dims=384, num_layers=12, num_heads=6),
        ('b', 'base'): dict(embed_dims=768, num_layers=12, num_heads=12),
        ('l', 'large'): dict(embed_dims=1024, num_layers=24, num_heads=16),
    }

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 img_size: Union[int, Tuple[int, int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 mask_mode: str = 'causal',
                 soft_mask_rate: float = 0.,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'cls_token',
                 final_norm: bool = True,
                 drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 qkv_bias: bool = True,
                 norm_cfg: Optional[dict] = None,
                 rope_theta: float = 10000.,
                 ffn_type: str = 'swiglu',
                 cls_position: str = 'last',
                 use_rope: bool = True,
                 use_pos_embed: bool = True,
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 qat: Optional[dict] = None,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self._set_mask_mode(mask_mode)
        self.cls_position = check_choice('ILLaMA cls_position', cls_position, CLS_POSITIONS, BackboneConfigError)
        check_choice('ILLaMA ffn_type', ffn_type, FFN_TYPES, BackboneConfigError)
        setting = resolve_arch(arch, self.arch_zoo, ('embed_dims', 'num_layers', 'num_heads'))
        self.embed_dims = setting['embed_dims']
        self.num_layers = setting['num_layers']
        self._set_outputs(out_indices, out_type, final_norm, frozen_stages)
        norm_cfg = norm_cfg or dict(type='RMSNorm', eps=1e-6)

        self._build_patch_embed(in_channels, patch_size, img_size)
        num_patches = self.patch_resolution[0] * self.patch_resolution[1]
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        self.pos_embed = None
        if use_pos_embed:
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, self.embed_dims))
            self._register_load_state_dict_pre_hook(self._resize_loaded_pos_embed)
        self.pos_drop = nn.Dropout(drop_rate)
        head_dim = check_head_split(self.embed_dims, setting['num_heads'])
        self.rope = GridRoPE(head_dim, mode='1d', theta=rope_theta) if use_rope else None

        mixer = partial(SelfAttention, num_heads=setting['num_heads'], qkv_bias=qkv_bias, mask_mode=mask_mode)
        if ffn_type == 'swiglu':
            ffn = partial(SwiGLUFFN, feedforward_channels=setting.get('ffn_hidden_dims',
                                                                      swiglu_hidden_dims(self.embed_dims)),
                          bias=False, add_identity=False)
        else:
            ffn = partial(gelu_mlp, feedforward_channels=setting.get('ffn_hidden_dims', 4 * self.embed_dims))
        self.layers = nn.ModuleList(
            TransformerBlock(self.embed_dims, mixer, ffn, norm_cfg=norm_cfg) for _ in range(self.num_layers))
        self.drop_path_rate = drop_path_rate
        self.norm = build_norm_layer(norm_cfg, self.embed_dims) if final_norm else nn.Identity()
        self.pool_norm = nn.Identity()
        self.soft_mask_rate = soft_mask_rate
        self.with_cp = with_cp
        if qat is not None:
            quantize_blocks(self, **qat)
        self._freeze_stages()

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """``(B, C, H, W)`` images -> one output per ``out_indices`` entry (shapes: see ``out_type``)."""
        check_image_batch(x, self.in_channels)
        patches, grid = self.patch_embed(x)
        tokens = insert_cls_token(patches, self.cls_token, self.cls_position)
        if self.pos_embed is not None:
            tokens = tokens + resize_pos_embed(self.pos_embed, self.patch_resolution, grid,
                                               cls_position=self.cls_position)
        tokens = self.pos_drop(tokens)
        angles = None if self.rope is None else self.rope.sequence_angles(grid, self.cls_position, x.device)
        return self.run_layers(tokens, TokenLayout(grid, self.cls_position, angles, self.rope))
