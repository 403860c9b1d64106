"""InLine attention backbones for timm, Hugging Face transformers and OpenMMLab 2.0 (mmdet 3.x and mmseg 1.x).

Importing the package needs torch and timm only. It registers the ImageNet classifiers
``inline_swin_{tiny,small,base}``, ``inline_pvt_{tiny,small,medium,large}``, ``inline_cswin_{tiny,small,base}``,
``inline_deit_{tiny,small,base}`` and ``flatten_swin_{tiny,small,base}`` with timm (``timm.create_model(name,
features_only=True)`` and ``forward_intermediates`` for dense prediction) and exports the family backbones
:class:`InLineSwinTransformer`, :class:`InLinePVT` and :class:`InLineCSwinTransformer` (plain modules).

Where an OpenMMLab line is installed, it also installs the OpenMMLab edge (:mod:`inline_backbones.openmmlab.edge`):
the backbones are registered in the ``inline_backbones`` registry scope (reach them from any mmdet/mmseg config as
``type='inline_backbones.InLineSwinTransformer'`` / ``'inline_backbones.InLinePVT'`` /
``'inline_backbones.InLineCSwinTransformer'``), mmengine Runner checkpoints are allow-listed for torch's safe
``weights_only`` loading, and ``mmdet::`` / ``mmseg::`` config names resolve on either line. It imports neither mmdet
nor mmseg. Without a line, asking for an OpenMMLab name (``inline_backbones.MODELS``, an OpenMMLab tool) is an
:class:`~.frameworks.OpenMMLabNotInstalled` error naming the extras.
"""
from .checkpoints.loading import CheckpointMismatchError, load_pretrained
from .frameworks import OpenMMLabNotInstalled, openmmlab_installed, require_openmmlab
from .models import (
    InLineAttention,
    InLineCSwinClassifier,
    InLineCSwinTransformer,
    InLineDeiTClassifier,
    InLinePVT,
    InLinePVTClassifier,
    InLineSwinClassifier,
    InLineSwinTransformer,
    WindowAttention,
    parse_attn_layout,
)

if openmmlab_installed():
    from .openmmlab.edge import install as _install_openmmlab_edge

    _install_openmmlab_edge()

# The OpenMMLab names: resolved at use (PEP 562), each needing a line.
_OPENMMLAB_NAMES = {'MODELS': 'inline_backbones.registry',
                    'allow_mmengine_checkpoints': 'inline_backbones.openmmlab.checkpoints'}


def __getattr__(name):
    if name in _OPENMMLAB_NAMES:
        require_openmmlab(f'inline_backbones.{name}')
        import importlib

        return getattr(importlib.import_module(_OPENMMLAB_NAMES[name]), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__version__ = '0.1.0'
__all__ = ['CheckpointMismatchError', 'InLineAttention', 'InLineCSwinClassifier', 'InLineCSwinTransformer',
           'InLineDeiTClassifier', 'InLinePVT', 'InLinePVTClassifier', 'InLineSwinClassifier', 'InLineSwinTransformer',
           'OpenMMLabNotInstalled', 'WindowAttention', 'load_pretrained', 'openmmlab_installed', 'parse_attn_layout',
           'require_openmmlab']
if openmmlab_installed():
    __all__ += sorted(_OPENMMLAB_NAMES)
