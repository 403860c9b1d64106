# Mask R-CNN + FPN with InLine-Swin-T, 3x schedule (36 epochs, steps 27/33), multi-scale + DETR-style
# random-crop training, AdamW lr 1e-4 wd 0.05 (no decay on norms / relative position bias tables),
# 8 GPUs x 2 images. Inherits mmdet's own Swin-T recipe and replaces only the backbone.
_base_ = 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py'

custom_imports = dict(imports=['inline_backbones', 'inline_backbones.det_preprocessor'],
                      allow_failed_imports=False)

# Released ImageNet-1k InLine-Swin-T checkpoint, relative to the working directory; override with
# --cfg-options model.backbone.init_cfg.checkpoint=/path/to/inline_swin_t.pth
pretrained = 'checkpoints/inline_swin_t.pth'

model = dict(
    # Attaches each image's img_shape to the batch for the padding-aware backbone (see README).
    data_preprocessor=dict(type='inline_backbones.RegionDetDataPreprocessor'),
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLineSwinTransformer',
        padding_aware=True,  # features independent of the batch's padding
        arch='tiny',
        drop_path_rate=0.2,
        out_indices=(0, 1, 2, 3),
        with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[96, 192, 384, 768]))

# Swin's detection schedule (Swin-Transformer-Object-Detection's mmdet 2.x schedule_1x base, shared by its
# 1x and 3x configs): linear warm-up over 500 iterations from 0.001 x lr (mmdet 3.x's Swin config: 1000).
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
    dict(type='MultiStepLR', begin=0, end=36, by_epoch=True, milestones=[27, 33], gamma=0.1),
]
# Keep the last 3 epoch checkpoints and the best one by box AP (best_coco_bbox_mAP_epoch_N.pth).
default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3, save_best='coco/bbox_mAP', rule='greater'))
