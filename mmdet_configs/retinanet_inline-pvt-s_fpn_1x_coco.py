# RetinaNet with InLine-PVT-S on COCO, 1x: mmdet's PVT recipe as in retinanet_inline-pvt-t_fpn_1x_coco.py
# (AdamW lr 1e-4, wd 1e-4, 12 epochs, steps 8 and 11, 8 GPUs x 2 images, drop path 0.1).
_base_ = './retinanet_inline-pvt-t_fpn_1x_coco.py'

# The authors' released ImageNet-1k InLine-PVT-S checkpoint (inline_backbones/checkpoints/released.py).
pretrained = 'https://cloud.tsinghua.edu.cn/f/1ab953b2479d433080a3/?dl=1'

model = dict(backbone=dict(arch='small', init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
