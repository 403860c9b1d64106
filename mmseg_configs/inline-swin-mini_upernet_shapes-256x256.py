# Embedded default: a small InLine-Swin UperNet trained from scratch on the generated "shapes" label
# maps (tools/misc/make_shapes_dataset.py, data/shapes/) in a few minutes on a 2-core CPU, evaluated with
# mmseg's IoUMetric. Also the template for fine-tuning on your own images + label PNGs: change
# data_root, metainfo (class names and palette) and num_classes, and set backbone init_cfg / load_from.
_base_ = './inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'

classes = ('background', 'disc', 'box', 'triangle', 'hexagon')
palette = [(0, 0, 0), (220, 60, 60), (60, 200, 60), (60, 90, 230), (230, 200, 40)]
num_classes = len(classes)
data_root = 'data/shapes/'
crop_size = (256, 256)
max_iters = 600
norm_cfg = dict(type='BN', requires_grad=True)  # single-process CPU training: no SyncBN
custom_imports = dict(imports=['inline_backbones', 'inline_backbones.openmmlab.seg_preprocessor',
                               'inline_backbones.openmmlab.seg_losses'], allow_failed_imports=False)
# Background at half weight: most pixels are background, and unweighted, one seed in three never learned the
# triangle (docs/demo.md). mmseg 1.2's CrossEntropyLoss fails on ignored (padded) pixels when class_weight is
# set, hence the package's ClassWeightedCrossEntropyLoss (inline_backbones/openmmlab/seg_losses.py).
loss = dict(type='inline_backbones.ClassWeightedCrossEntropyLoss', use_sigmoid=False,
            class_weight=[0.5] + [1.0] * (num_classes - 1))

model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8]),
        attn_type='IIIS',
        drop_path_rate=0.1,
        init_cfg=None),
    decode_head=dict(in_channels=[32, 64, 128, 256], channels=64, num_classes=num_classes, norm_cfg=norm_cfg,
                     loss_decode=dict(loss, loss_weight=1.0)),
    auxiliary_head=dict(in_channels=128, channels=32, num_classes=num_classes, norm_cfg=norm_cfg,
                        loss_decode=dict(loss, loss_weight=0.4)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
dataset = dict(type='BaseSegDataset', data_root=data_root, metainfo=dict(classes=classes, palette=palette),
               img_suffix='.jpg', seg_map_suffix='.png', reduce_zero_label=False)
train_dataloader = dict(
    batch_size=4, num_workers=1, persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(_delete_=True, **dataset, pipeline=train_pipeline,
                 data_prefix=dict(img_path='images/train', seg_map_path='labels/train')))
val_dataloader = dict(
    batch_size=1, num_workers=1, persistent_workers=True,
    dataset=dict(_delete_=True, **dataset, pipeline=test_pipeline,
                 data_prefix=dict(img_path='images/val', seg_map_path='labels/val')))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator

train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.01))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=100, end=max_iters, by_epoch=False),
]
default_hooks = dict(
    logger=dict(interval=50),
    checkpoint=dict(by_epoch=False, interval=max_iters // 4, max_keep_ckpts=2))
# One seed for the data order, the augmentations and the initialisation: the demo gives the same numbers each run
# (up to nondeterministic kernels); demo/run_embedded.py --seed N changes it.
randomness = dict(seed=0)
