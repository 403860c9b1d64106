# Cascade Mask R-CNN + FPN with InLine-CSwin-S, 3x schedule: the InLine-Swin-T recipe of cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-3x_coco.py (Swin's
# schedule, which CSWin's paper follows for COCO) with the InLine-CSwin backbone written whole. CSWin released no
# detection configs; the drop path is the one of the InLine-Swin config of the same size and schedule.
_base_ = './cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-3x_coco.py'

# The authors' released ImageNet-1k InLine-CSwin-S checkpoint (inline_backbones/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/59f4e65f776f4052b93c/?dl=1'

model = dict(
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLineCSwinTransformer',
        padding_aware=True,  # features independent of the batch's padding
        arch='small',
        drop_path_rate=0.2,
        out_indices=(0, 1, 2, 3),
        with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[64, 128, 256, 512]))
