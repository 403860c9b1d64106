"""A whole exported segmentor: the file's label map (and logits) completed as mmseg's inference completes them.

For a BGR image of (H0, W0): the config's test resize (:func:`.images.pipeline_resize`) to (H1, W1); images below the
minimum padded bottom/right with the normalisation mean (0 after normalising, mmseg's ``pad_val``) and cropped
back; the file run on the whole image, or in ``slide`` mode on crops of ``crop_size`` every ``stride`` (mmseg's
``slide_inference``: crop ``[y1, y2) x [x1, x2)`` with ``y2 = min(y1 + h_crop, H1)``, ``y1 = max(y2 - h_crop, 0)``,
logits summed over the crops and divided by how many cover each pixel); then, when the resize changed the size,
the logits resized to (H0, W0) (:mod:`.resize`, mmseg's ``postprocess_result``) and the argmax.
"""
import numpy as np

from .images import pad_to, pipeline_resize, to_input
from .resize import resize_and_label


class Segmentor:
    """``predict(image)``: ``{'labels': (H0, W0) int64, 'logits': (C, H0, W0) or None}`` for a BGR uint8 image."""

    task = 'segmentation'

    def __init__(self, backend):
        self.backend, self.meta = backend, backend.meta
        self.has_logits = 'logits' in self.meta['outputs']

    def predict(self, image, logits=False):
        meta = self.meta
        if logits and not self.has_logits:
            raise ValueError(f'{self.backend.path} was exported without logits: export with --logits')
        resized, _ = pipeline_resize(image, meta['resize'])
        same_size = resized.shape[:2] == image.shape[:2]
        if meta['test_cfg']['mode'] == 'slide':
            labels, scores = None, self._slide(resized)
        else:
            labels, scores = self._run(resized)
        if same_size:
            if labels is None:
                labels = scores.argmax(0) if scores.shape[0] > 1 else \
                    (1 / (1 + np.exp(-scores[0])) > meta.get('threshold', 0.3)).astype(np.int64)
            return dict(labels=labels.astype(np.int64), logits=scores if logits else None)
        labels, kept = resize_and_label(scores, image.shape[:2], meta.get('align_corners', False),
                                        keep_logits=logits, threshold=meta.get('threshold', 0.3))
        return dict(labels=labels, logits=kept)

    def file_inputs(self, image):
        """The file's inputs for each run on a BGR image (one run, or one per crop in ``slide`` mode)."""
        resized, _ = pipeline_resize(image, self.meta['resize'])
        if self.meta['test_cfg']['mode'] != 'slide':
            return [self._inputs(resized)]
        return [self._inputs(resized[y1:y2, x1:x2]) for y1, y2, x1, x2 in self._crops(resized.shape[:2])]

    def _inputs(self, image):
        """The file's inputs for one image: padded to the minimum size, and its region inside the padded input
        (read by padding-aware backbones)."""
        h, w = image.shape[:2]
        inp = self.meta['input']
        padded, _ = pad_to(image, inp['pad_value'], inp.get('size_divisor'), inp.get('pad_size'))
        return [to_input(padded), np.array([[h, w]], np.int64)][:len(self.backend.input_names)]

    def _run(self, image):
        """The file on one image (padded, then cropped back): (labels (h, w), logits (C, h, w) or None)."""
        h, w = image.shape[:2]
        outputs = self.backend(*self._inputs(image))
        labels = outputs[0][0, :h, :w]
        return labels, (outputs[1][0, :, :h, :w] if self.has_logits else None)

    def _crops(self, size):
        """mmseg's slide crops ``(y1, y2, x1, x2)`` of an image of ``size``."""
        h_crop, w_crop = self.meta['test_cfg']['crop_size']
        h_stride, w_stride = self.meta['test_cfg']['stride']
        H, W = size
        h_grids = max(H - h_crop + h_stride - 1, 0) // h_stride + 1
        w_grids = max(W - w_crop + w_stride - 1, 0) // w_stride + 1
        for i in range(h_grids):
            for j in range(w_grids):
                y2, x2 = min(i * h_stride + h_crop, H), min(j * w_stride + w_crop, W)
                yield max(y2 - h_crop, 0), y2, max(x2 - w_crop, 0), x2

    def _slide(self, image):
        """mmseg's ``slide_inference`` over the file: (C, H, W) averaged logits."""
        H, W = image.shape[:2]
        preds, count = None, np.zeros((H, W), np.float32)
        for y1, y2, x1, x2 in self._crops((H, W)):
            _, crop = self._run(image[y1:y2, x1:x2])
            if preds is None:
                preds = np.zeros((crop.shape[0], H, W), np.float32)
            preds[:, y1:y2, x1:x2] += crop
            count[y1:y2, x1:x2] += 1
        return preds / count
