"""The package's model registry.

``MODELS`` is a child of mmengine's root ``MODELS`` registry with scope ``inline_backbones`` (the
pattern mmpretrain uses). mmdet's and mmseg's registries are siblings under the same root, so a config
of either task reaches our classes with the scope prefix, without this package importing mmdet or
mmseg::

    custom_imports = dict(imports=['inline_backbones'], allow_failed_imports=False)
    model = dict(backbone=dict(type='inline_backbones.InLineSwinTransformer', arch='tiny'))
"""
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import Registry

MODELS = Registry(
    'model', parent=MMENGINE_MODELS, scope='inline_backbones', locations=['inline_backbones.models'])
