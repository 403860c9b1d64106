# Cascade Mask R-CNN + FPN with InLine-Swin-T, 3x schedule (36 epochs, steps 27/33), the Swin protocol:
# multi-scale + DETR-style random-crop training, AdamW lr 1e-4 wd 0.05 (no decay on norms / relative
# position bias tables / local residual generator), 8 GPUs x 2 images, and Swin's cascade heads (4 shared
# convs + 1 fc with SyncBN, GIoU loss on decoded boxes). Model and data come from mmdet's Cascade Mask R-CNN config.
_base_ = 'mmdet::cascade_rcnn/cascade-mask-rcnn_r50_fpn_1x_coco.py'

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
    neck=dict(in_channels=[96, 192, 384, 768]),
    roi_head=dict(bbox_head=[
        dict(
            type='ConvFCBBoxHead',
            num_shared_convs=4,
            num_shared_fcs=1,
            in_channels=256,
            conv_out_channels=256,
            fc_out_channels=1024,
            roi_feat_size=7,
            num_classes=80,
            bbox_coder=dict(type='DeltaXYWHBBoxCoder', target_means=[0., 0., 0., 0.], target_stds=stds),
            reg_class_agnostic=False,
            reg_decoded_bbox=True,
            norm_cfg=dict(type='SyncBN', requires_grad=True),
            loss_cls=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
            loss_bbox=dict(type='GIoULoss', loss_weight=10.0))
        for stds in ([0.1, 0.1, 0.2, 0.2], [0.05, 0.05, 0.1, 0.1], [0.033, 0.033, 0.067, 0.067])
    ]))

# Multi-scale training with the DETR-style random-crop branch (the pipeline of mmdet's
# swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py, which the Mask R-CNN configs inherit directly).
multi_scales = [(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333),
                (672, 1333), (704, 1333), (736, 1333), (768, 1333), (800, 1333)]
train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='RandomChoice', transforms=[
        [dict(type='RandomChoiceResize', scales=multi_scales, keep_ratio=True)],
        [dict(type='RandomChoiceResize', scales=[(400, 1333), (500, 1333), (600, 1333)], keep_ratio=True),
         dict(type='RandomCrop', crop_type='absolute_range', crop_size=(384, 600), allow_negative_crop=True),
         dict(type='RandomChoiceResize', scales=multi_scales, keep_ratio=True)],
    ]),
    dict(type='PackDetInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),  # Swin: 500-iteration warm-up
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[27, 33], gamma=0.1),
]
# Weight decay: the Swin recipe's treatment, extended to InLine's own module. No decay on norms and relative
# position bias tables (Swin's custom_keys), 0.05 on every other weight and bias, as in Swin's detection
# and segmentation recipes, and no decay on the local residual's kernel generator (attn.residual, weights and
# biases): it is InLine's position-dependent local term, the counterpart of the bias tables, and its bias is
# the static 3x3 kernel, which the authors' ImageNet training kept out of weight decay (docs/finetune.md).
optim_wrapper = dict(
    type='OptimWrapper',
    paramwise_cfg=dict(custom_keys={
        'relative_position_bias_table': dict(decay_mult=0.),
        'norm': dict(decay_mult=0.),
        'attn.residual': dict(decay_mult=0.),
    }),
    optimizer=dict(_delete_=True, type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05))
# Keep the last 3 epoch checkpoints and the best one by box AP (best_coco_bbox_mAP_epoch_N.pth).
default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3, save_best='coco/bbox_mAP', rule='greater'))
