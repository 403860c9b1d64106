# UperNet with InLine-Swin-S: the InLine-Swin-T recipe (160k iterations, 512x512 ADE20K crops) with the small backbone.
_base_ = './inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'

# The authors' released ImageNet-1k InLine-Swin-S checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/e9657fd247c04c7cb1a1/?dl=1'

model = dict(
    backbone=dict(arch='small', drop_path_rate=0.3, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
