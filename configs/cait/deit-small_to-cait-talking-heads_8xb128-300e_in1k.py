# Table 8 row 3 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"): "+ Talking-heads",
# 80.5 top-1 (22M, 4.6 GFLOPs; Sec. 4.3 gives 79.9 -> 80.3 for the same step with 6 heads). The previous rung
# (deit-small_to-cait-8-heads, 80.0) with talking-heads attention in every block (attn_type='talking_heads'). The
# paper gives no formula; the mixings are the official code's (deit cait_models.py Attention_talking_head: Linear(h,
# h) with bias over the head axis before and after the softmax, mmcausal/models/cait/talking_heads.py).
_base_ = './deit-small_to-cait-8-heads_8xb128-300e_in1k.py'

model = dict(backbone=dict(attn_type='talking_heads'))
