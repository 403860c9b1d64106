"""Deprecated location of the InLine-PVT timm classifiers: they live in their family's
module, :mod:`inline_backbones.models.families.inline_pvt` (registered with timm when ``inline_backbones`` is
imported). This alias will be removed in 0.3."""
import warnings

from .models.families.inline_pvt import (  # noqa: F401
              InLinePVTClassifier,
              inline_pvt_large,
              inline_pvt_medium,
              inline_pvt_small,
              inline_pvt_tiny,
)

warnings.warn('inline_backbones.timm_pvt moved to inline_backbones.models.families.inline_pvt', DeprecationWarning,
              stacklevel=2)
