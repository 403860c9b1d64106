"""``load(path)``: an exported file in a runtime, as the task's predictor (:class:`.segmentation.Segmentor` or
:class:`.detection.Detector`), chosen by the file's metadata."""
from .backends import Backend


def load(path, runtime='onnxruntime', precision='fp32', threads=None):
    """The predictor of an exported file: ``predict(bgr_image)`` gives the task's result (see the classes)."""
    backend = Backend(path, runtime, precision, threads)
    if backend.meta['task'] == 'segmentation':
        from .segmentation import Segmentor

        return Segmentor(backend)
    from .detection import Detector

    return Detector(backend)
