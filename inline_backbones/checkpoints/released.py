"""The authors' released ImageNet-1k checkpoints (LeapLabTHU/InLine README): one table, used by the docs and
checked against every COCO / ADE20K config (which write the link literally so that users and ``mim`` see it).

FLatten-Swin-T/S/B, the comparison models, come from LeapLabTHU/FLatten-Transformer's README. The links are Tsinghua
cloud shares, ``https://cloud.tsinghua.edu.cn/f/<id>/?dl=1``; as an ``init_cfg``
checkpoint they are downloaded once into torch's hub cache
(:func:`inline_backbones.checkpoints.loading.download_checkpoint`).
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
    'inline_cswin_t': _SHARE.format('49fa2ecc543647c4b970'),
    'inline_cswin_s': _SHARE.format('59f4e65f776f4052b93c'),
    'inline_cswin_b': _SHARE.format('91e17121df284ae38521'),
    'inline_deit_t': _SHARE.format('1d6b8191ad6d4114b291'),
    'inline_deit_s': _SHARE.format('2f3898b07e9247f3beb3'),
    'inline_deit_b': _SHARE.format('10bdd726d4b0435eb34e'),
    # FLatten-Swin-T/S/B (LeapLabTHU/FLatten-Transformer README), the comparison models
    'flatten_swin_t': _SHARE.format('e1518e76703e4e57a7f2'),
    'flatten_swin_s': _SHARE.format('94188e52af354bf4a88b'),
    'flatten_swin_b': _SHARE.format('7a9e5186bad04e7fb3a9'),
}

# timm's name of each released model -> its model function's docstring (the paper's figures, at 224 x 224 unless
# the figure names another size).
PAPER_FIGURES = {
    'inline_swin_tiny': 'InLine-Swin-T: embed 96, depths 2-2-6-2, layout IIIS; ImageNet-1k top-1 82.4 (paper).',
    'inline_swin_small': 'InLine-Swin-S: embed 96, depths 2-2-18-2, layout IISS; ImageNet-1k top-1 83.6 (paper).',
    'inline_swin_base': 'InLine-Swin-B: embed 128, depths 2-2-18-2, layout IIMS2; ImageNet-1k top-1 84.1 (paper).',
    'inline_pvt_tiny': 'InLine-PVT-T: depths 2-2-2-2, layout IIII; 12.0M params, 2.0G FLOPs (paper).',
    'inline_pvt_small': 'InLine-PVT-S: depths 3-4-6-3, layout IIII; 21.6M params, 3.9G FLOPs (paper).',
    'inline_pvt_medium': 'InLine-PVT-M: depths 3-4-18-3, layout IIII; 37.6M params, 6.9G FLOPs (paper).',
    'inline_pvt_large': 'InLine-PVT-L: depths 3-8-27-3, layout IIII; 51.2M params (paper: 50.2M), 10.2G FLOPs.',
    'inline_cswin_tiny': 'InLine-CSwin-T: embed 64, depths 2-4-18-1, layout IISS; ImageNet-1k top-1 83.2 (paper).',
    'inline_cswin_small': 'InLine-CSwin-S: embed 64, depths 3-6-29-2, layout IISS; ImageNet-1k top-1 83.8 (paper).',
    'inline_cswin_base': 'InLine-CSwin-B: embed 96, depths 3-6-29-2, layout IISS; ImageNet-1k top-1 84.5 (paper).',
    'inline_deit_tiny': 'InLine-DeiT-T: embed 192, depths 12, layout I; at 224 px ImageNet-1k top-1 74.5 (paper).',
    'inline_deit_small': 'InLine-DeiT-S: embed 320, depths 12, layout I; at 288 px ImageNet-1k top-1 80.2 (paper).',
    'inline_deit_base': 'InLine-DeiT-B: embed 384, depths 12, layout I; at 448 px ImageNet-1k top-1 82.3 (paper).',
    'flatten_swin_tiny': 'FLatten-Swin-T: embed 96, depths 2-2-6-2, layout FFSS; ImageNet-1k top-1 82.1 (authors).',
    'flatten_swin_small': 'FLatten-Swin-S: embed 96, depths 2-2-18-2, layout FFSS; ImageNet-1k top-1 83.5 (authors).',
    'flatten_swin_base': 'FLatten-Swin-B: embed 128, depths 2-2-18-2, layout FFSS; ImageNet-1k top-1 83.8 (authors).',
}


def arch_checkpoints(prefix):
    """``arch`` -> link of the released models named ``{prefix}{arch}`` (``RELEASED_CHECKPOINTS[prefix + arch[0]]``)."""
    return {name[len(prefix):]: RELEASED_CHECKPOINTS[name[:len(prefix) + 1]]
            for name in PAPER_FIGURES if name.startswith(prefix)}


# InLineSwinTransformer ``arch`` name -> its released checkpoint's link.
SWIN_ARCH_CHECKPOINTS = arch_checkpoints('inline_swin_')

# InLinePVT ``arch`` name -> its released checkpoint's link.
PVT_ARCH_CHECKPOINTS = arch_checkpoints('inline_pvt_')

# InLineCSwinTransformer ``arch`` name -> its released checkpoint's link.
CSWIN_ARCH_CHECKPOINTS = arch_checkpoints('inline_cswin_')

# FLatten-Swin (InLineSwinTransformer ``arch`` ``'flatten-' + name``) name -> its released checkpoint's link.
FLATTEN_SWIN_ARCH_CHECKPOINTS = arch_checkpoints('flatten_swin_')
