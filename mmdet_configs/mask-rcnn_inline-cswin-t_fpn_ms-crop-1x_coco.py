# Mask R-CNN + FPN with InLine-CSwin-T, 1x schedule: the InLine-Swin-T recipe of
# mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py (Swin's schedule, which CSWin's paper follows for COCO) with the
# InLine-CSwin backbone written whole. CSWin released no detection configs; the drop path is the one of the
# InLine-Swin config of the same size and schedule.
_base_ = './mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py'

# The authors' released ImageNet-1k InLine-CSwin-T checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/49fa2ecc543647c4b970/?dl=1'

model = dict(
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLineCSwinTransformer',
        padding_aware=True,  # features independent of the batch's padding
        arch='tiny',
        drop_path_rate=0.1,
        out_indices=(0, 1, 2, 3),
        with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[64, 128, 256, 512]))
