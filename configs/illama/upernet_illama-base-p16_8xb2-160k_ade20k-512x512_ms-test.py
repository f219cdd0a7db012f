# Multi-scale + flip test of the iLLaMA-B UperNet (the protocol of paper Table 10), for tools/test.py:
#     python tools/test.py configs/illama/upernet_illama-base-p16_8xb2-160k_ade20k-512x512_ms-test.py CHECKPOINT
# It applies the base config's `tta_model` / `tta_pipeline` as mmseg's `tools/test.py --tta` does: the segmentor
# is wrapped in `SegTTAModel` (softmax averaged over 6 scales x 2 flips, each scale run with slide inference) and
# the test set runs through `tta_pipeline`. Checkpoints of the base config load unchanged. Test only (no training).
_base_ = ['./upernet_illama-base-p16_8xb2-160k_ade20k-512x512.py']

model = dict(_delete_=True, type='SegTTAModel', module={{_base_.model}})
test_dataloader = dict(dataset=dict(pipeline={{_base_.tta_pipeline}}))
