# Fine-tuning Mask R-CNN + InLine-Swin-T on your own COCO-format data (docs/finetune.md walks through it):
# the 1x COCO recipe with your classes, your folder and a schedule for a few hundred images. The backbone
# starts from the authors' released ImageNet-1k checkpoint (inherited init_cfg: downloaded once into
# torch's hub cache); the neck and heads start from scratch: no COCO-trained InLine model is released.
# Copy this file next to the others (or keep it here) and edit data_root and classes.
_base_ = './mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py'

# DATA_ROOT/annotations/instances_{train,val}.json (COCO instances, polygon or RLE masks) and the images in
# DATA_ROOT/images/{train,val}/ (tools/misc/make_shapes_dataset.py --root data/my_dataset writes such a folder).
data_root = 'data/my_dataset/'
# Your category names as in the json's "categories", in the order the json lists them (mmdet numbers the labels
# in that order).
classes = ('disc', 'box', 'triangle', 'hexagon')
metainfo = dict(classes=classes)

model = dict(roi_head=dict(bbox_head=dict(num_classes=len(classes)), mask_head=dict(num_classes=len(classes))))
# Stops before the first iteration if `classes`, the datasets' classes, the heads' num_classes and the annotation
# files' categories disagree: a child config that changes `classes` keeps this file's metainfo and num_classes (a
# config's variables are resolved when it is read), so write your own with tools/misc/finetune_config.py or set every
# value (docs/finetune.md). allow_subset=True trains on some of a file's categories on purpose (logged).
custom_hooks = [dict(type='inline_backbones.ClassCheckHook')]

# One scale with flips (the COCO recipe's multi-scale + crop augmentation is meant for 118k images; drop the
# pipeline= lines below to inherit it).
image_scale = (1333, 800)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(
    batch_size=2,
    dataset=dict(data_root=data_root, metainfo=metainfo, ann_file='annotations/instances_train.json',
                 data_prefix=dict(img='images/train/'), pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(data_root=data_root, metainfo=metainfo, ann_file='annotations/instances_val.json',
                 data_prefix=dict(img='images/val/'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val.json')
test_evaluator = val_evaluator

# A few hundred images give ~150 iterations per epoch at batch 2: 24 epochs with steps at 16 and 22, and a
# linear warm-up of 50 iterations (the COCO recipe's 500 would last several epochs here).
max_epochs = 24
train_cfg = dict(max_epochs=max_epochs, val_interval=2)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=50),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[16, 22], gamma=0.1),
]
# lr 1e-4 (inherited) is the recipe's for 16 images per step (inherited auto_scale_lr base_batch_size=16): with
# --auto-scale-lr mmengine scales it by (GPUs x batch_size) / 16, e.g. to 1.25e-5 on one GPU with 2 images.
