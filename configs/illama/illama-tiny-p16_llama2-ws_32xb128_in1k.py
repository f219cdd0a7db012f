# iLLaMA-T on ImageNet-1K initialised from LLaMA2-7B by weight selection (paper App. I, Table 18: 74.5 top-1, 75.0 from
# a random init). App. I trains the initialised model with the from-scratch recipe, and the official run
# (https://github.com/techmonsterwang/iLLaMA/blob/dfc93b97/scripts/train_illama_tiny_from_llama2.sh) is the
# from-scratch script plus --finetune of the selected weights: the weights are an initialisation only, the optimizer
# and schedule start fresh. So this config is illama-tiny-p16_32xb128_in1k.py with the backbone's Pretrained init
# (the whole backbone: the selected blocks, the rest a seeded fresh init); the head keeps its init. Make the file
# with tools/model_converters/llama2illama.py --arch tiny (README, "Initialisation from LLaMA-2").
_base_ = './illama-tiny-p16_32xb128_in1k.py'

model = dict(backbone=dict(init_cfg=dict(
    type='Pretrained', checkpoint='work_dirs/llama2-ws/illama-tiny_llama2-7b-ws.pth', prefix='backbone.')))
