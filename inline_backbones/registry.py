"""The package's registries in mmengine's tree: models and hooks (part of the OpenMMLab edge; importing this module
needs mmengine, ``import inline_backbones`` does not).

``MODELS`` is a child of mmengine's root ``MODELS`` registry with scope ``inline_backbones`` (the
pattern mmpretrain uses). mmdet's and mmseg's registries are siblings under the same root, so a config
of either task reaches our classes with the scope prefix, without this package importing mmdet or
mmseg::

    custom_imports = dict(imports=['inline_backbones'], allow_failed_imports=False)
    model = dict(backbone=dict(type='inline_backbones.InLineSwinTransformer', arch='tiny'))

``HOOKS`` is the same for mmengine's ``HOOKS``: ``custom_hooks = [dict(type='inline_backbones.ClassCheckHook')]``
(:mod:`inline_backbones.openmmlab.class_check`, imported by the registry when a config names it).
"""
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import Registry

MODELS = Registry(
    'model', parent=MMENGINE_MODELS, scope='inline_backbones', locations=['inline_backbones.openmmlab.edge'])
HOOKS = Registry(
    'hook', parent=MMENGINE_HOOKS, scope='inline_backbones', locations=['inline_backbones.openmmlab.class_check'])
