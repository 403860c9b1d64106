"""Run a whole exported segmentor or detector of this repository without torch or OpenMMLab.

Needs numpy, OpenCV and one runtime: onnxruntime or openvino. The file (ONNX, or OpenVINO IR converted from it)
carries its own metadata (:mod:`.metadata`: task, classes, palette, the test resize, what the file computes and
what this package completes), so an exported file is all a serving machine needs::

    from inline_runtime import load
    model = load('upernet.onnx')                    # or runtime='openvino', precision='bf16'
    result = model.predict(cv2.imread('street.jpg'))   # a label map, or boxes/scores/labels(/masks)

``python -m inline_runtime FILE IMAGE_OR_FOLDER ... --out-dir DIR`` writes the outputs of ``tools/infer.py``.
Nothing in this package imports torch, mmengine, mmcv, mmdet, mmseg or inline_backbones.
"""
from .backends import RUNTIMES, Backend, RuntimeInputError
from .metadata import META_KEY, read_metadata
from .model import load

__all__ = ['META_KEY', 'RUNTIMES', 'Backend', 'RuntimeInputError', 'load', 'read_metadata']
