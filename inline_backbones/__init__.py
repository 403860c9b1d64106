"""InLine attention backbones for OpenMMLab 2.0 (mmdet 3.x and mmseg 1.x).

Importing the package registers :class:`InLineSwinTransformer`, :class:`InLinePVT` and
:class:`InLineCSwinTransformer` in the ``inline_backbones`` registry scope (reach them from any mmdet/mmseg config
as ``type='inline_backbones.InLineSwinTransformer'`` / ``'inline_backbones.InLinePVT'`` /
``'inline_backbones.InLineCSwinTransformer'``) and
allow-lists the classes of mmengine Runner checkpoints for torch's safe ``weights_only`` loading.
It also registers the ImageNet classifiers ``inline_swin_{tiny,small,base}``,
``inline_pvt_{tiny,small,medium,large}``, ``inline_cswin_{tiny,small,base}`` and ``inline_deit_{tiny,small,base}``
with timm.
It imports neither mmdet nor mmseg.
"""
import importlib.util

if importlib.util.find_spec('mmengine') is None:
    raise ModuleNotFoundError(
        "inline_backbones needs mmengine from one OpenMMLab line, and none is installed: "
        "pip install -e '.[official]' (mmengine, mmcv, mmdet, mmsegmentation) or -e '.[onedl]' (the maintained fork, "
        "onedl-*); `make setup` (STACK=official|onedl) builds mmcv's ops too. See docs/installation.md.",
        name='mmengine')

from .checkpoints.loading import (
    CheckpointMismatchError,
    allow_mmengine_checkpoints,
    load_pretrained,
    route_mmengine_local_loads,
)
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
from .openmmlab import config_scopes
from .registry import MODELS

allow_mmengine_checkpoints()
route_mmengine_local_loads()   # mmengine's local checkpoint reads: the same safe load, the package's errors
config_scopes.resolve()        # `mmseg::` / `mmdet::` config names resolved on either OpenMMLab line

__version__ = '0.1.0'
__all__ = ['CheckpointMismatchError', 'InLineAttention', 'InLineCSwinClassifier', 'InLineCSwinTransformer',
           'InLineDeiTClassifier',
           'InLinePVT', 'InLinePVTClassifier', 'InLineSwinClassifier',
           'InLineSwinTransformer', 'MODELS', 'WindowAttention', 'allow_mmengine_checkpoints', 'load_pretrained',
           'parse_attn_layout']
