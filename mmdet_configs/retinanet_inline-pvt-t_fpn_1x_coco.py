# RetinaNet with InLine-PVT-T on COCO, 1x: mmdet's own PVT recipe (pvt/retinanet_pvt-t_fpn_1x_coco.py, inherited):
# AdamW lr 1e-4, weight decay 1e-4 on every parameter, 12 epochs with steps after epochs 8 and 11 (500-iteration
# linear warm-up from 0.001), 8 GPUs x 2 images, single-scale 1333x800, FPN from stage 2 (start_level=1) with
# extra convolutions on its input. Drop path 0.1 as mmdet's PVT (its class default) for every size. Not in the
# paper's table: the standard PVT detection benchmark. Only the backbone is replaced.
_base_ = 'mmdet::pvt/retinanet_pvt-t_fpn_1x_coco.py'

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
