"""Deprecated location of the InLine-Swin timm classifiers: they live in their family's
module, :mod:`inline_backbones.models.families.inline_swin` (registered with timm when ``inline_backbones`` is
imported). This alias will be removed in 0.3."""
import warnings

from .models.families.inline_swin import InLineSwinClassifier, inline_swin_base, inline_swin_small, inline_swin_tiny  # noqa: F401
from .timm_classifier import checkpoint_filter_fn, to_nhwc  # noqa: F401

warnings.warn('inline_backbones.timm_models moved to inline_backbones.models.families.inline_swin', DeprecationWarning,
              stacklevel=2)
