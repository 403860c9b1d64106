"""A whole exported detector: mmdet's test pipeline before the file, and what the file leaves after it.

For a BGR image of (H0, W0): the config's test resize (:func:`.images.pipeline_resize`, mmcv's ``Resize``) to (h, w)
and ``scale_factor`` (w / W0, h / H0); padding bottom/right with the normalisation mean to multiples of the data
preprocessor's ``pad_size_divisor`` (mmdet's ``DetDataPreprocessor`` pads with 0 after normalising: the same
values); the file on ``image, img_shape = (h, w), scale_factor``. The file gives the detections in the original
image (boxes rescaled, NMS done, best first) and, for instance segmentation, each detection's (28, 28) mask
probabilities, which :func:`paste_mask` puts into the image as mmdet's ``_do_paste_mask`` does, thresholded at
``mask_thr_binary``.

Pasting (mmdet's ``grid_sample`` with ``align_corners=False``, zero padding): pixel ``x`` of the box
``[x0, x1)`` samples the mask at ``s = ((x + 0.5 - x0) / (x1 - x0) * 2 - 1) * m / 2 + (m - 1) / 2`` (``m`` = 28),
bilinearly between cells ``floor(s)`` and ``floor(s) + 1`` (cells outside the mask count 0); the same along y.
Only pixels ``[floor(x0) - 1, ceil(x1) + 1)`` (clipped to the image) are computed, as mmdet on the CPU; the rest
are False.
"""
import numpy as np

from .images import pad_to, pipeline_resize, to_input


class Detector:
    """``predict(image)``: ``{'boxes': (N, 4) float32 xyxy, 'scores': (N,), 'labels': (N,) int64, 'masks':
    (N, H0, W0) bool or None}`` for a BGR uint8 image, in its pixels, best first."""

    task = 'detection'

    def __init__(self, backend):
        self.backend, self.meta = backend, backend.meta

    def file_inputs(self, image):
        """The file's inputs for a BGR image: ``[image, img_shape, scale_factor]`` of its one run."""
        inp = self.meta['input']
        resized, scale = pipeline_resize(image, self.meta['resize'])
        padded, _ = pad_to(resized, inp['pad_value'], inp.get('size_divisor'))
        return [[to_input(padded), np.array(resized.shape[:2], np.int64), np.array(scale, np.float32)]]

    def predict(self, image):
        outputs = dict(zip(self.meta['outputs'], self.backend(*self.file_inputs(image)[0]), strict=True))
        boxes = outputs['boxes']
        masks = None
        if 'masks' in outputs:
            threshold = self.meta['test_cfg']['mask_thr_binary']
            masks = np.zeros((len(boxes), *image.shape[:2]), bool)
            for mask, probs, box in zip(masks, outputs['masks'], boxes, strict=True):
                paste_mask(mask, probs, box, threshold)
        return dict(boxes=boxes, scores=outputs['scores'], labels=outputs['labels'].astype(np.int64), masks=masks)


def sample_points(start, stop, box_lo, box_hi, cells):
    """Mask coordinates (float32) of the pixel centres ``start .. stop - 1`` of a box side (see the module)."""
    centre = np.arange(start, stop, dtype=np.float32) + np.float32(0.5)
    with np.errstate(divide='ignore', invalid='ignore'):
        norm = (centre - box_lo) / (box_hi - box_lo) * np.float32(2) - np.float32(1)
    norm[np.isinf(norm)] = 0       # a box of zero size, as mmdet
    return norm * np.float32(cells / 2) + np.float32((cells - 1) / 2)


def bilinear_taps(points, cells):
    """(lower cell, upper cell, lower weight, upper weight) per point; cells outside the mask weigh 0."""
    lower = np.floor(points)
    frac = (points - lower).astype(np.float32)
    lower = lower.astype(np.int64)
    upper = lower + 1
    w_lower = np.where((lower >= 0) & (lower < cells), np.float32(1) - frac, np.float32(0))
    w_upper = np.where((upper >= 0) & (upper < cells), frac, np.float32(0))
    return np.clip(lower, 0, cells - 1), np.clip(upper, 0, cells - 1), w_lower, w_upper


def paste_mask(out, probs, box, threshold):
    """Write into ``out`` (H0, W0) bool the (m, m) mask probabilities ``probs`` pasted into ``box`` (x0, y0, x1,
    y1), ``>= threshold``."""
    img_h, img_w = out.shape
    x0, y0, x1, y1 = (np.float32(v) for v in box)
    xs, ys = max(int(np.floor(x0)) - 1, 0), max(int(np.floor(y0)) - 1, 0)
    xe, ye = min(int(np.ceil(x1)) + 1, img_w), min(int(np.ceil(y1)) + 1, img_h)
    if xe <= xs or ye <= ys:
        return
    m_h, m_w = probs.shape
    yl, yu, wyl, wyu = bilinear_taps(sample_points(ys, ye, y0, y1, m_h), m_h)
    xl, xu, wxl, wxu = bilinear_taps(sample_points(xs, xe, x0, x1, m_w), m_w)
    probs = probs.astype(np.float32)
    value = (probs[yl][:, xl] * (wyl[:, None] * wxl) + probs[yl][:, xu] * (wyl[:, None] * wxu)
             + probs[yu][:, xl] * (wyu[:, None] * wxl) + probs[yu][:, xu] * (wyu[:, None] * wxu))
    out[ys:ye, xs:xe] = value >= threshold
