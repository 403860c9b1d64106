# Semantic FPN with InLine-PVT-T on ADE20K, 512x512 crops: the PVT segmentation protocol the paper's ADE20K
# table follows (PVT's and Agent-Attention's sem_fpn configs): 40k iterations, 8 GPUs x 2 images, AdamW lr 2e-4,
# weight decay 1e-4 on every parameter, poly decay (power 0.9) down to 0 with no warm-up, drop path 0.1 for every
# size (PVT's segmentation backbones). Inherits mmseg's own Semantic FPN recipe and replaces what it ships for
# ResNet: SGD lr 0.01 wd 5e-4, 160k iterations, eta_min 1e-4, 4 images per GPU, the ResNet-50 `pretrained`.
_base_ = ['./_base_/openmmlab_scopes.py', 'mmseg::sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py']

custom_imports = dict(imports=['inline_backbones'], allow_failed_imports=False)

# The authors' released ImageNet-1k InLine-PVT-T checkpoint (inline_backbones/checkpoints/released.py), downloaded once
# into torch's hub cache; a local copy: --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.pth
pretrained = 'https://cloud.tsinghua.edu.cn/f/90ac52b1555b401eb5e6/?dl=1'

model = dict(
    pretrained=None,  # the base's 'open-mmlab://resnet50_v1c' would be handed to the backbone
    # At test time a side below 32 px (the stride of the last stage; a thin image after the resize) is padded to
    # 32 and the prediction cropped back (mmseg's own test padding); larger images are not padded.
    data_preprocessor=dict(test_cfg=dict(size=(32, 32))),
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLinePVT',
        arch='tiny',
        drop_path_rate=0.1,
        out_indices=(0, 1, 2, 3),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[64, 128, 320, 512]))

# Replaces both the base's top-level `optimizer` (SGD) and the one inside optim_wrapper.
optimizer = dict(_delete_=True, type='AdamW', lr=2e-4, weight_decay=1e-4)
optim_wrapper = dict(type='OptimWrapper', optimizer=optimizer, clip_grad=None)

max_iters = 40000
param_scheduler = [dict(type='PolyLR', eta_min=0.0, power=0.9, begin=0, end=max_iters, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=4000)
train_dataloader = dict(batch_size=2)

# A checkpoint and a validation every 4k iterations (PVT's); keep the last 3 and the best one by mIoU.
default_hooks = dict(checkpoint=dict(by_epoch=False, interval=4000, max_keep_ckpts=3, save_best='mIoU',
                                     rule='greater'))
