"""The OpenMMLab edge: what ``import inline_backbones`` adds where an OpenMMLab line is installed (:func:`install`).

* The family backbones (plain modules with mmengine's module protocol, :class:`~inline_backbones.models.backbone.
  Backbone`) registered in the ``inline_backbones`` scope (:mod:`inline_backbones.registry`), so that a config of
  either task builds them as ``type='inline_backbones.InLineSwinTransformer'``.
* mmengine's current logger (a Runner's log) and initializers lent to the backbones
  (:func:`inline_backbones.frameworks.lend`).
* mmengine's checkpoints through the package's safe loader (:mod:`.checkpoints`).
* ``mmdet::`` / ``mmseg::`` config names resolved on either line (:mod:`.config_scopes`).

Without a line none of this is imported; the timm classifiers, the backbones and the loader work alone.
"""
import functools

from mmengine.logging import MMLogger
from mmengine.model import initialize

from .. import frameworks
from ..models import InLineCSwinTransformer, InLinePVT, InLineSwinTransformer
from ..registry import MODELS
from . import checkpoints, config_scopes

BACKBONES = (InLineSwinTransformer, InLinePVT, InLineCSwinTransformer)


@functools.cache
def install():
    """Register the backbones, lend mmengine's logger and initializers, route mmengine's checkpoint loads, resolve
    the config scopes. Idempotent (run once per process)."""
    for cls in BACKBONES:
        MODELS.register_module(module=cls)
    frameworks.lend(logger=MMLogger.get_current_instance, initialize=initialize)
    checkpoints.allow_mmengine_checkpoints()
    checkpoints.route_mmengine_local_loads()   # mmengine's local checkpoint reads: the same safe load, our errors
    config_scopes.resolve()
