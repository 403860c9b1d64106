# UperNet with InLine-CSwin-T: CSWin's ADE20K recipe (microsoft/CSWin-Transformer segmentation/configs/cswin/
# upernet_cswin_tiny.py: 160k iterations, 512x512 crops, AdamW lr 6e-5 wd 0.01, 1500-iteration warm-up then poly,
# 8 GPUs x 2 images, drop path 0.3), which is the InLine-Swin-T config's (mmseg's Swin recipe) but for the drop
# path; the backbone written whole.
_base_ = './inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'

# The authors' released ImageNet-1k InLine-CSwin-T checkpoint (inline_backbones/checkpoints/released.py)
pretrained = 'https://cloud.tsinghua.edu.cn/f/49fa2ecc543647c4b970/?dl=1'

model = dict(
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLineCSwinTransformer',
        padding_aware=True,  # features independent of the batch's padding
        arch='tiny',
        drop_path_rate=0.3,
        out_indices=(0, 1, 2, 3),
        with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    decode_head=dict(in_channels=[64, 128, 256, 512]),
    auxiliary_head=dict(in_channels=256))
