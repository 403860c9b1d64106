# Mask R-CNN + FPN with InLine-CSwin-B, 1x schedule: the InLine-Swin-T recipe of mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py (Swin's
# schedule, which CSWin's paper follows for COCO) with the InLine-CSwin backbone written whole. CSWin released no
# detection configs; the drop path is the one of the InLine-Swin config of the same size and schedule.
_base_ = './mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py'

# The authors' released ImageNet-1k InLine-CSwin-B checkpoint (inline_backbones/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/91e17121df284ae38521/?dl=1'

model = dict(
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLineCSwinTransformer',
        padding_aware=True,  # features independent of the batch's padding
        arch='base',
        drop_path_rate=0.3,
        out_indices=(0, 1, 2, 3),
        with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[96, 192, 384, 768]))
