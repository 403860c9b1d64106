# Cascade Mask R-CNN + FPN with InLine-Swin-S: the InLine-Swin-T recipe (3x schedule) with the small backbone.
_base_ = './cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-3x_coco.py'

# The authors' released ImageNet-1k InLine-Swin-S checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/e9657fd247c04c7cb1a1/?dl=1'

model = dict(
    backbone=dict(
        arch='small',
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
