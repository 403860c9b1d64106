# UperNet + auxiliary FCN head with InLine-Swin-T on ADE20K, 512x512 crops, 160k iterations,
# AdamW lr 6e-5 betas (0.9, 0.999) wd 0.01 (no decay on norms / relative position bias tables),
# 1500-iteration linear warm-up then poly decay, 8 GPUs x 2 images. Inherits mmseg's own Swin-T recipe
# and replaces only the backbone.
_base_ = 'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'

custom_imports = dict(imports=['inline_backbones', 'inline_backbones.seg_preprocessor'],
                      allow_failed_imports=False)

# Released ImageNet-1k InLine-Swin-T checkpoint, relative to the working directory; override with
# --cfg-options model.backbone.init_cfg.checkpoint=/path/to/inline_swin_t.pth
pretrained = 'checkpoints/inline_swin_t.pth'

model = dict(
    # Attaches each image's img_shape to the batch for the padding-aware backbone (see README).
    data_preprocessor=dict(type='inline_backbones.RegionSegDataPreProcessor'),
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLineSwinTransformer',
        padding_aware=True,  # features independent of the batch's padding
        arch='tiny',
        drop_path_rate=0.3,
        out_indices=(0, 1, 2, 3),
        with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    decode_head=dict(in_channels=[96, 192, 384, 768], num_classes=150),
    auxiliary_head=dict(in_channels=384, num_classes=150))

# Keep the last 3 checkpoints (every 16k iterations) and the best one by mIoU (best_mIoU_iter_N.pth).
default_hooks = dict(checkpoint=dict(max_keep_ckpts=3, save_best='mIoU', rule='greater'))
