"""The authors' released ImageNet-1k checkpoints (LeapLabTHU/InLine README): one table, used by the docs and
checked against every COCO / ADE20K config (which write the link literally so that users and ``mim`` see it).

The links are Tsinghua cloud shares, ``https://cloud.tsinghua.edu.cn/f/<id>/?dl=1``; as an ``init_cfg``
checkpoint they are downloaded once into torch's hub cache (:func:`inline_backbones.checkpoint.download_checkpoint`).
No COCO- or ADE20K-trained InLine model is released.
"""

_SHARE = 'https://cloud.tsinghua.edu.cn/f/{}/?dl=1'

RELEASED_CHECKPOINTS = {
    'inline_swin_t': _SHARE.format('32810869fcc34410966b'),
    'inline_swin_s': _SHARE.format('e9657fd247c04c7cb1a1'),
    'inline_swin_b': _SHARE.format('bf23564bb64c420aafe1'),
    'inline_pvt_t': _SHARE.format('90ac52b1555b401eb5e6'),
    'inline_pvt_s': _SHARE.format('1ab953b2479d433080a3'),
    'inline_pvt_m': _SHARE.format('a72aec31e6084bc0a280'),
    'inline_pvt_l': _SHARE.format('efd91318ba964f01b288'),
}

# InLineSwinTransformer ``arch`` name -> its released checkpoint's link.
SWIN_ARCH_CHECKPOINTS = {arch: RELEASED_CHECKPOINTS[f'inline_swin_{arch[0]}'] for arch in ('tiny', 'small', 'base')}

# InLinePVT ``arch`` name -> its released checkpoint's link.
PVT_ARCH_CHECKPOINTS = {arch: RELEASED_CHECKPOINTS[f'inline_pvt_{arch[0]}']
                        for arch in ('tiny', 'small', 'medium', 'large')}
