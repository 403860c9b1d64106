# UperNet with InLine-CSwin-S: the InLine-CSwin-T config (CSWin's ADE20K recipe) with the small backbone and
# CSWin-S's drop path (0.4, microsoft/CSWin-Transformer segmentation/configs/cswin/upernet_cswin_small.py).
_base_ = './inline-cswin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'

# The authors' released ImageNet-1k InLine-CSwin-S checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/59f4e65f776f4052b93c/?dl=1'

model = dict(
    backbone=dict(arch='small', drop_path_rate=0.4, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
