# UperNet with InLine-CSwin-B: the InLine-CSwin-T config (CSWin's ADE20K recipe) with the base backbone and
# CSWin-B's drop path (0.6, microsoft/CSWin-Transformer segmentation/configs/cswin/upernet_cswin_base.py).
_base_ = './inline-cswin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'

# The authors' released ImageNet-1k InLine-CSwin-B checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/91e17121df284ae38521/?dl=1'

model = dict(
    backbone=dict(arch='base', drop_path_rate=0.6, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    decode_head=dict(in_channels=[96, 192, 384, 768]),
    auxiliary_head=dict(in_channels=384))
