# Mask R-CNN with InLine-PVT-L on COCO, 1x: the PVT protocol of mask-rcnn_inline-pvt-t_fpn_1x_coco.py
# (AdamW lr 2e-4, wd 1e-4, 12 epochs, steps 8 and 11, 8 GPUs x 2 images) with drop path 0.2 (0.1 for T/S/M).
_base_ = './mask-rcnn_inline-pvt-t_fpn_1x_coco.py'

# The authors' released ImageNet-1k InLine-PVT-L checkpoint (inline_backbones/checkpoints/released.py).
pretrained = 'https://cloud.tsinghua.edu.cn/f/efd91318ba964f01b288/?dl=1'

model = dict(
    backbone=dict(arch='large', drop_path_rate=0.2, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
