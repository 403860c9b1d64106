# Semantic FPN with InLine-PVT-S on ADE20K, 512x512: the PVT protocol of fpn_inline-pvt-t_8xb2-40k_ade20k-512x512.py
# (40k iterations, 8 GPUs x 2 images, AdamW lr 2e-4, wd 1e-4, poly 0.9 to 0, drop path 0.1).
_base_ = './fpn_inline-pvt-t_8xb2-40k_ade20k-512x512.py'

# The authors' released ImageNet-1k InLine-PVT-S checkpoint (inline_backbones/checkpoints/released.py).
pretrained = 'https://cloud.tsinghua.edu.cn/f/1ab953b2479d433080a3/?dl=1'

model = dict(backbone=dict(arch='small', init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
