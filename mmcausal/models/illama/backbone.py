"""iLLaMA: a LLaMA-style decoder as a vision transformer (Wang et al. 2024, "Adapting LLaMA Decoder to
Vision Transformer").

Sequence: ``[patch_1 .. patch_N, cls]`` (post-sequence class token, Sec. 3.2) + a learnable absolute
position embedding over all ``N + 1`` tokens (cls row last), RoPE on q/k with positions ``0..N`` (cls at
``N``), then ``depth`` pre-norm blocks of RMSNorm -> attention -> RMSNorm -> SwiGLU. The soft mask
(Eq. 2) mixes causal and bidirectional attention with the runtime rate ``soft_mask_rate``.
"""
from functools import partial
from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from mmcausal.registry import MODELS
from ..layers import (
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
    insert_cls_token,
    resize_pos_embed,
    resolve_arch,
    swiglu_hidden_dims,
)


@MODELS.register_module()
class ILLaMA(MaskedAttentionMixin, PlainBackbone):
    """iLLaMA backbone.

    Args:
        arch: ``'tiny' | 'small' | 'base' | 'large'`` (or ``t/s/b/l``), or a dict with ``embed_dims``,
            ``num_layers``, ``num_heads`` (optional ``ffn_hidden_dims``).
        img_size: training resolution; sets the stored position-embedding grid (``img_size / 16``).
            Any input size is accepted at run time: the image is zero-padded at the bottom/right to a
            multiple of ``patch_size`` (mmcv ``PatchEmbed``, ``padding='corner'``), the patch grid is
            ``ceil(H/16) x ceil(W/16)``, the position table is resized (bicubic) to it and RoPE covers the
            actual sequence length.
        mask_mode: ``'causal'`` (default; strict, SDPA fast path), ``'official'`` (the released weights'
            post-softmax soft mask, paper Eq. 2) or ``'bidirectional'``. See :mod:`mmcausal.models.layers.attention`.
        soft_mask_rate: initial ``alpha``; training schedules set it with ``SoftMaskHook``.
        out_indices: blocks whose output is returned (negative indices allowed).
        out_type: ``'raw'`` (B, N+1, D) all tokens in sequence order, cls last; ``'cls_token'`` (B, D);
            ``'featmap'`` (B, D, H/16, W/16) without cls; ``'avg_featmap'`` (B, D) mean of patch tokens.
        final_norm: apply the final RMSNorm to the last block's output.
        drop_rate: dropout after adding the position embedding.
        drop_path_rate: stochastic depth, linear from 0 (first block) to this value (last block).
        frozen_stages: freeze the stem (patch/pos/cls) and the first ``frozen_stages`` blocks; -1 = none.
        with_cp: gradient checkpointing of every block (recomputes activations in the backward pass: same
            gradients, far less memory).
        norm_cfg, qkv_bias, rope_theta, patch_size, in_channels: as named.
    """
    arch_zoo = {
        ('t', 'tiny'): dict(embed_dims=192, num_layers=12, num_heads=3),
        ('s', 'small'): dict(embed_dims=384, num_layers=12, num_heads=6),
        ('b', 'base'): dict(embed_dims=768, num_layers=12, num_heads=12),
        ('l', 'large'): dict(embed_dims=1024, num_layers=24, num_heads=16),
    }
    cls_position = 'last'

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
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self._set_mask_mode(mask_mode)
        setting = resolve_arch(arch, self.arch_zoo, ('embed_dims', 'num_layers', 'num_heads'))
        self.embed_dims = setting['embed_dims']
        self.num_layers = setting['num_layers']
        self._set_outputs(out_indices, out_type, final_norm, frozen_stages)
        norm_cfg = norm_cfg or dict(type='RMSNorm', eps=1e-6)

        self._build_patch_embed(in_channels, patch_size, img_size)
        num_patches = self.patch_resolution[0] * self.patch_resolution[1]
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, self.embed_dims))
        self._register_load_state_dict_pre_hook(self._resize_loaded_pos_embed)
        self.pos_drop = nn.Dropout(drop_rate)
        self.rope = GridRoPE(check_head_split(self.embed_dims, setting['num_heads']), mode='1d', theta=rope_theta)

        mixer = partial(SelfAttention, num_heads=setting['num_heads'], qkv_bias=qkv_bias, mask_mode=mask_mode)
        ffn = partial(SwiGLUFFN, feedforward_channels=setting.get('ffn_hidden_dims',
                                                                  swiglu_hidden_dims(self.embed_dims)),
                      bias=False, add_identity=False)
        self.layers = nn.ModuleList(
            TransformerBlock(self.embed_dims, mixer, ffn, norm_cfg=norm_cfg) for _ in range(self.num_layers))
        self.drop_path_rate = drop_path_rate
        self.norm = build_norm_layer(norm_cfg, self.embed_dims) if final_norm else nn.Identity()
        self.pool_norm = nn.Identity()
        self.soft_mask_rate = soft_mask_rate
        self.with_cp = with_cp
        self._freeze_stages()

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """``(B, C, H, W)`` images -> one output per ``out_indices`` entry (shapes: see ``out_type``)."""
        check_image_batch(x, self.in_channels)
        patches, grid = self.patch_embed(x)
        tokens = insert_cls_token(patches, self.cls_token, self.cls_position)
        pos_embed = resize_pos_embed(self.pos_embed, self.patch_resolution, grid, cls_position=self.cls_position)
        tokens = self.pos_drop(tokens + pos_embed)
        layout = TokenLayout(grid, self.cls_position, self.rope.sequence_angles(grid, self.cls_position, x.device),
                             self.rope)
        return self.run_layers(tokens, layout)
