# Mask R-CNN + FPN with InLine-Swin-T, 3x schedule (36 epochs, steps 27/33), multi-scale + DETR-style
# random-crop training, AdamW lr 1e-4 wd 0.05 (no decay on norms / relative position bias tables /
# local residual generator), 8 GPUs x 2 images. Inherits mmdet's own Swin-T recipe and replaces only the backbone.
_base_ = 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py'

custom_imports = dict(imports=['inline_backbones', 'inline_backbones.openmmlab.det_preprocessor'],
                      allow_failed_imports=False)

# The authors' released ImageNet-1k InLine-Swin-T checkpoint (inline_backbones/checkpoints/released.py), downloaded once
# into torch's hub cache; a local copy: --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.pth
pretrained = 'https://cloud.tsinghua.edu.cn/f/32810869fcc34410966b/?dl=1'

model = dict(
    # Attaches each image's img_shape to the batch for the padding-aware backbone
    # (docs/padding_aware.md#how-the-backbone-learns-each-images-region).
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
# Weight decay: the Swin recipe's treatment, extended to InLine's own module. No decay on norms and relative
# position bias tables (Swin's custom_keys, inherited from mmdet's Swin config), 0.05 on every other weight and
# bias, as in Swin's detection and segmentation recipes, and no decay on the local residual's kernel generator
# (attn.residual, weights and biases): it is InLine's position-dependent local term, the counterpart of the bias
# tables, and its bias is the static 3x3 kernel, which the authors' ImageNet training kept out of weight decay
# (docs/finetune.md).
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'attn.residual': dict(decay_mult=0.)}))

# Keep the last 3 epoch checkpoints and the best one by box AP (best_coco_bbox_mAP_epoch_N.pth).
default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3, save_best='coco/bbox_mAP', rule='greater'))
