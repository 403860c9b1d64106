# Cascade Mask R-CNN + FPN with InLine-Swin-S: the InLine-Swin-T recipe (1x schedule) with the small backbone.
_base_ = './cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py'

pretrained = 'checkpoints/inline_swin_s.pth'  # released ImageNet-1k checkpoint (see README)

model = dict(
    backbone=dict(
        arch='small',
        drop_path_rate=0.2,  # no Swin 1x run of this size: the 3x value (README)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
