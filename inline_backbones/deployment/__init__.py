"""Whole-model deployment: a trained segmentor or detector as one ONNX file (:mod:`.whole`), with the metadata
that :mod:`inline_runtime` reads to run it without torch or OpenMMLab."""
