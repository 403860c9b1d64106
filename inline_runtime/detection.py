"""A whole exported detector: mmdet's test pipeline before the file, and what the file leaves after it.

For a BGR image of (H0, W0): the config's test resize (:func:`.images.test_resize`, mmcv's ``Resize``) to (h, w)
and ``scale_factor`` (w / W0, h / H0); padding bottom/right with the normalisation mean to multiples of the data
preprocessor's ``pad_size_divisor`` (mmdet's ``DetDataPreprocessor`` pads with 0 after normalising: the same
values); the file on ``image, img_shape = (h, w), scale_factor``. The file gives the detections in the original
image (boxes rescaled, NMS done, best first).
"""
import numpy as np

from .images import pad_to, test_resize, to_input


class Detector:
    """``predict(image)``: ``{'boxes': (N, 4) float32 xyxy, 'scores': (N,), 'labels': (N,) int64, 'masks':
    None}`` for a BGR uint8 image, in its pixels."""

    task = 'detection'

    def __init__(self, backend):
        self.backend, self.meta = backend, backend.meta

    def predict(self, image):
        inp = self.meta['input']
        resized, scale = test_resize(image, self.meta['resize'])
        padded, _ = pad_to(resized, inp['pad_value'], inp.get('size_divisor'))
        outputs = dict(zip(self.meta['outputs'], self.backend(
            to_input(padded), np.array(resized.shape[:2], np.int64), np.array(scale, np.float32)), strict=True))
        return dict(boxes=outputs['boxes'], scores=outputs['scores'], labels=outputs['labels'].astype(np.int64),
                    masks=None)
