# Mask R-CNN + FPN with InLine-Swin-B: the InLine-Swin-T recipe (3x schedule) with the base backbone.
_base_ = './mask-rcnn_inline-swin-t_fpn_ms-crop-3x_coco.py'

pretrained = 'checkpoints/inline_swin_b.pth'  # released ImageNet-1k checkpoint (see README)

model = dict(
    backbone=dict(
        arch='base',
        drop_path_rate=0.3,  # no Swin Mask R-CNN Swin-B: Cascade Swin-B 3x value (README)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[128, 256, 512, 1024]))
