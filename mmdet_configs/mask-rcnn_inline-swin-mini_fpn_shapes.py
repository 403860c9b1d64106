# Embedded default: a small InLine-Swin Mask R-CNN trained from scratch on the generated "shapes" set
# (tools/misc/make_shapes_dataset.py, data/shapes/) in about ten minutes on a 2-core CPU, evaluated with
# mmdet's CocoMetric. Also the template for fine-tuning on your own COCO-format data: change
# data_root, metainfo and num_classes, and set backbone init_cfg / load_from (docs/finetune.md#3-the-config).
_base_ = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'

custom_imports = dict(imports=['inline_backbones', 'inline_backbones.openmmlab.det_preprocessor'],
                      allow_failed_imports=False)

classes = ('disc', 'box', 'triangle', 'hexagon')
metainfo = dict(classes=classes, palette=[(220, 60, 60), (60, 200, 60), (60, 90, 230), (230, 200, 40)])
num_classes = len(classes)
data_root = 'data/shapes/'
image_size = (256, 256)
max_iters = 800

model = dict(
    # Attaches each image's img_shape to the batch for the padding-aware backbone
    # (docs/padding_aware.md#how-the-backbone-learns-each-images-region).
    data_preprocessor=dict(type='inline_backbones.RegionDetDataPreprocessor'),
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLineSwinTransformer',
        padding_aware=True,  # features independent of the batch's padding
        arch=dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8]),
        attn_type='IIIS',
        drop_path_rate=0.1,
        out_indices=(0, 1, 2, 3),
        init_cfg=None),
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=64),
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64, roi_layer=dict(sampling_ratio=2)),
        bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=num_classes),
        mask_roi_extractor=dict(out_channels=64, roi_layer=dict(sampling_ratio=2)),
        mask_head=dict(in_channels=64, conv_out_channels=64, num_classes=num_classes)),
    train_cfg=dict(
        rpn_proposal=dict(nms_pre=500, max_per_img=200),
        rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(
        rpn=dict(nms_pre=500, max_per_img=200),
        rcnn=dict(max_per_img=50)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(
    batch_size=4, num_workers=1, persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(data_root=data_root, metainfo=metainfo, ann_file='annotations/instances_train.json',
                 data_prefix=dict(img='images/train/'), pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=4, num_workers=1, persistent_workers=True,
    dataset=dict(data_root=data_root, metainfo=metainfo, ann_file='annotations/instances_val.json',
                 data_prefix=dict(img='images/val/'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val.json', metric=['bbox', 'segm'], classwise=True)
test_evaluator = val_evaluator

train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=100),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=100, end=max_iters, eta_min=1e-5),
]
optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(custom_keys={'relative_position_bias_table': dict(decay_mult=0.),
                                    'norm': dict(decay_mult=0.)}),
    clip_grad=dict(max_norm=10.0))
default_hooks = dict(
    logger=dict(interval=50),
    checkpoint=dict(by_epoch=False, interval=max_iters // 4, max_keep_ckpts=2))
log_processor = dict(by_epoch=False)
auto_scale_lr = dict(enable=False, base_batch_size=4)
# One seed for the data order, the augmentations and the initialisation: the demo gives the same numbers each run
# (up to nondeterministic kernels); demo/run_embedded.py --seed N changes it.
randomness = dict(seed=0)
