# The 3x recipe (same multi-scale + crop pipeline) on the 1x schedule: 12 epochs, steps 8 and 11, and
# Swin's 1x drop path for Cascade Mask R-CNN Swin-T (0.0, i.e. none; the 3x run uses 0.2).
_base_ = './cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-3x_coco.py'

model = dict(backbone=dict(drop_path_rate=0.0))

max_epochs = 12
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[8, 11], gamma=0.1),
]
