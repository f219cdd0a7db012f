# Multi-scale + flip test of the iLLaMA-T UperNet (paper Table 10's protocol); see the iLLaMA-B `_ms-test` config.
_base_ = ['./upernet_illama-tiny-p16_8xb2-160k_ade20k-512x512.py']

model = dict(_delete_=True, type='SegTTAModel', module={{_base_.model}})
test_dataloader = dict(dataset=dict(pipeline={{_base_.tta_pipeline}}))
