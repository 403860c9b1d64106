# Mask R-CNN with InLine-PVT-M on COCO, 1x: the PVT protocol of mask-rcnn_inline-pvt-t_fpn_1x_coco.py
# (AdamW lr 2e-4, wd 1e-4, 12 epochs, steps 8 and 11, 8 GPUs x 2 images) with drop path 0.1.
_base_ = './mask-rcnn_inline-pvt-t_fpn_1x_coco.py'

# The authors' released ImageNet-1k InLine-PVT-M checkpoint (inline_backbones/checkpoints/released.py).
pretrained = 'https://cloud.tsinghua.edu.cn/f/a72aec31e6084bc0a280/?dl=1'

model = dict(
    backbone=dict(arch='medium', drop_path_rate=0.1, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
