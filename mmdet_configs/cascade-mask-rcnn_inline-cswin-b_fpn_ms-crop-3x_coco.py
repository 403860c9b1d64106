# Cascade Mask R-CNN + FPN with InLine-CSwin-B, 3x schedule: the InLine-CSwin-T config with the base backbone
# (drop path of the InLine-Swin-B config of the same kind and schedule).
_base_ = './cascade-mask-rcnn_inline-cswin-t_fpn_ms-crop-3x_coco.py'

# The authors' released ImageNet-1k InLine-CSwin-B checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/91e17121df284ae38521/?dl=1'

model = dict(
    backbone=dict(arch='base', drop_path_rate=0.3, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[96, 192, 384, 768]))
