# RetinaNet with InLine-PVT-L on COCO, 1x: mmdet's PVT recipe as in retinanet_inline-pvt-t_fpn_1x_coco.py
# (AdamW lr 1e-4, wd 1e-4, 12 epochs, steps 8 and 11, 8 GPUs x 2 images, drop path 0.1).
# fp32 as every config of this toolkit; mmdet's PVT-L config trains with AmpOptimWrapper, which --amp gives.
_base_ = './retinanet_inline-pvt-t_fpn_1x_coco.py'

# The authors' released ImageNet-1k InLine-PVT-L checkpoint (inline_backbones/checkpoints/released.py).
pretrained = 'https://cloud.tsinghua.edu.cn/f/efd91318ba964f01b288/?dl=1'

model = dict(backbone=dict(arch='large', init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
