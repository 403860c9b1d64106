# UperNet with InLine-Swin-B: the InLine-Swin-T recipe (160k iterations, 512x512 ADE20K crops) with the base backbone.
_base_ = './inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'

# The authors' released ImageNet-1k InLine-Swin-B checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/bf23564bb64c420aafe1/?dl=1'

model = dict(
    backbone=dict(arch='base', drop_path_rate=0.3, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    decode_head=dict(in_channels=[128, 256, 512, 1024], num_classes=150),
    auxiliary_head=dict(in_channels=512, num_classes=150))
