# Mask R-CNN with InLine-PVT-T on COCO, 1x: the PVT detection protocol the paper's COCO table follows (PVT's
# and Agent-Attention's Mask R-CNN configs): AdamW lr 2e-4, weight decay 1e-4 on every parameter, 12 epochs
# with the learning rate divided by 10 after epochs 8 and 11 (500-iteration linear warm-up from 0.001),
# 8 GPUs x 2 images, single-scale 1333x800 training with flips. Inherits mmdet's Mask R-CNN R-50 1x and
# replaces the backbone and the optimizer.
_base_ = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'

custom_imports = dict(imports=['inline_backbones'], allow_failed_imports=False)

# The authors' released ImageNet-1k InLine-PVT-T checkpoint (inline_backbones/checkpoints/released.py), downloaded once
# into torch's hub cache; a local copy: --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.pth
pretrained = 'https://cloud.tsinghua.edu.cn/f/90ac52b1555b401eb5e6/?dl=1'

model = dict(
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLinePVT',
        arch='tiny',
        drop_path_rate=0.1,
        out_indices=(0, 1, 2, 3),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(in_channels=[64, 128, 320, 512]))

optim_wrapper = dict(optimizer=dict(_delete_=True, type='AdamW', lr=2e-4, weight_decay=1e-4))
