"""Deprecated location: the regions of a padded batch are input handling, now :mod:`inline_backbones.regions`
(beside the data preprocessors). This alias will be removed in 0.3."""
import warnings

from ..regions import (  # noqa: F401
                       RegionBatch,
                       attach_image_shapes,
                       attach_sample_shapes,
                       check_image_shapes,
                       infer_image_shapes,
                       resolve_regions,
                       split_regions,
)

warnings.warn('inline_backbones.models.image_regions moved to inline_backbones.regions', DeprecationWarning,
              stacklevel=2)
