# Mask R-CNN + FPN with InLine-Swin-B: the InLine-Swin-T recipe (1x schedule) with the base backbone.
_base_ = './mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py'

# The authors' released ImageNet-1k InLine-Swin-B checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/bf23564bb64c420aafe1/?dl=1'

model = dict(
    backbone=dict(
        arch='base',
        # no Swin 1x run of this size: the 3x value (docs/training.md#coco-detection-with-inline-swin-mmdet_configs)
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[128, 256, 512, 1024]))
