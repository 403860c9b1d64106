# Mask R-CNN + FPN with InLine-CSwin-S, 3x schedule: the InLine-CSwin-T config with the small backbone
# (drop path of the InLine-Swin-S config of the same kind and schedule).
_base_ = './mask-rcnn_inline-cswin-t_fpn_ms-crop-3x_coco.py'

# The authors' released ImageNet-1k InLine-CSwin-S checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/59f4e65f776f4052b93c/?dl=1'

model = dict(
    backbone=dict(arch='small', drop_path_rate=0.2, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
