# The official dense fine-tuning of Pyramid VisionLLaMA (the official segmentation/ and detection/ configs), shared by
# the ADE20K and COCO configs of configs/pyramid_vision_llama. Only prefixed variables (mmengine refuses keys defined by
# two bases): a config lists this file in `_base_` and takes `backbone={{_base_.pvl_small_dense_backbone}}`.
pvl_small_dense_backbone = dict(
    _delete_=True,  # drop the keys of the inherited Twins / Swin backbone
    type='PyramidVisionLLaMA',
    arch='small',
    gsa_key_pos='official',  # the released weights' GSA key positions (deit/my_models.py)
    mask_window_padding=False,  # official: padded LSA windows attend to the zero padding
    rope_mode='as2d',  # official auto-scale: AS2DRoPE on GSA, 14-token anchor for every stage, one scale from H
    rope_anchor=14,
    as2d_scaling='isotropic',
    out_type='featmap',
    out_indices=(0, 1, 2, 3),
    norm_after_stage=True,  # a new LayerNorm after every stage
    final_norm=False,
    drop_path_rate=0.2,  # paper D.7 and the official S/B configs
    # the deit checkpoint converted with tools/model_converters/pyramid_visionllama2mmcausal.py
    init_cfg=dict(type='Pretrained', checkpoint='checkpoints/pyramid-vision-llama-small_in1k.pth',
                  prefix='backbone.'))
pvl_base_dense_backbone = dict(
    pvl_small_dense_backbone,
    arch='base',
    init_cfg=dict(pvl_small_dense_backbone['init_cfg'],
                  checkpoint='checkpoints/pyramid-vision-llama-base_in1k.pth'))
pvl_base_dense_neck = dict(in_channels=[96, 192, 384, 768])
