# UperNet + auxiliary FCN head with InLine-Swin-T on ADE20K, 512x512 crops, 160k iterations,
# AdamW lr 6e-5 betas (0.9, 0.999) wd 0.01 (no decay on norms / relative position bias tables /
# local residual generator), 1500-iteration linear warm-up then poly decay, 8 GPUs x 2 images. Inherits
# mmseg's own Swin-T recipe and replaces only the backbone.
_base_ = ['./_base_/openmmlab_scopes.py',
          'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py']

custom_imports = dict(imports=['inline_backbones', 'inline_backbones.openmmlab.seg_preprocessor'],
                      allow_failed_imports=False)

# The authors' released ImageNet-1k InLine-Swin-T checkpoint (inline_backbones/checkpoints/released.py), downloaded once
# into torch's hub cache; a local copy: --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.pth
pretrained = 'https://cloud.tsinghua.edu.cn/f/32810869fcc34410966b/?dl=1'

model = dict(
    # Attaches each image's img_shape to the batch for the padding-aware backbone
    # (docs/padding_aware.md#how-the-backbone-learns-each-images-region). At test time a side below 32 px (the
    # stride of the last stage; a thin image after the resize) is padded to 32 and the prediction cropped back
    # (mmseg's own test padding; exact in padding-aware mode); larger images are not padded.
    data_preprocessor=dict(type='inline_backbones.RegionSegDataPreProcessor', test_cfg=dict(size=(32, 32))),
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

# Weight decay: the Swin recipe's treatment, extended to InLine's own module. No decay on norms and relative
# position bias tables (Swin's custom_keys, inherited from mmseg's Swin config), 0.01 on every other weight and
# bias, as in Swin's detection and segmentation recipes, and no decay on the local residual's kernel generator
# (attn.residual, weights and biases): it is InLine's position-dependent local term, the counterpart of the bias
# tables, and its bias is the static 3x3 kernel, which the authors' ImageNet training kept out of weight decay
# (docs/finetune.md).
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'attn.residual': dict(decay_mult=0.)}))

# Keep the last 3 checkpoints (every 16k iterations) and the best one by mIoU (best_mIoU_iter_N.pth).
default_hooks = dict(checkpoint=dict(max_keep_ckpts=3, save_best='mIoU', rule='greater'))
