"""mmdet glue: a ``DetDataPreprocessor`` that tells a padding-aware backbone each image's region.

Imported only by configs (``custom_imports``), never by ``import inline_backbones``, since it imports
mmdet. Use it as ``data_preprocessor=dict(type='inline_backbones.RegionDetDataPreprocessor', ...)``
with the same arguments as mmdet's ``DetDataPreprocessor``.
"""
from mmdet.models.data_preprocessors import DetDataPreprocessor

from ..regions import attach_sample_shapes
from ..registry import MODELS
from .pixel_check import RawPixelCheck


@MODELS.register_module()
class RegionDetDataPreprocessor(RawPixelCheck, DetDataPreprocessor):
    """mmdet's ``DetDataPreprocessor`` (normalise, pad, batch augments such as ``BatchSyncRandomResize`` /
    ``BatchFixedSizePad``), then the batch made a :class:`~inline_backbones.regions.RegionBatch` carrying each
    sample's ``img_shape`` (:func:`~inline_backbones.regions.attach_sample_shapes`). The first batch is checked
    for pixels left in 0-255 (a ``mean``/``std`` missing from the config): a warning in the log
    (:mod:`inline_backbones.openmmlab.pixel_check`)."""

    def forward(self, data, training=False):
        data = super().forward(data, training)
        self.check_raw_pixels(data['inputs'])
        return attach_sample_shapes(data)
