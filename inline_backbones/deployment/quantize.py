"""Post-training int8 quantisation of a whole exported file, calibrated on the user's own images.

onnxruntime's static quantisation (``onnxruntime.quantization.quantize_static``): the file is first prepared by
its ``quant_pre_process`` (shape inference, graph optimisation), then run in onnxruntime on the calibration images
(each prepared exactly as the runtime helper prepares images for the file) to record each activation's range
(min-max), and written in QDQ form: ``QuantizeLinear``/``DequantizeLinear`` pairs around the int8 weights (per
output channel) and activations (per tensor) of the :data:`QUANTISED_OPS`, which onnxruntime and OpenVINO both
execute as int8 kernels. The metadata is carried over with ``precision: 'int8'``.
"""
import json
import logging
import os
import tempfile

import onnx

from inline_runtime.metadata import META_KEY

# The layers computed in int8: the convolutions and matrix products, where the time goes. The rest (norms,
# softmax, the scores, box decoding, NMS, resizing) stays in float: quantising every op's output rounds the final
# scores to steps of 1/255.
QUANTISED_OPS = ('Conv', 'MatMul', 'Gemm')


class _Images:
    """onnxruntime's calibration reader over a list of input dicts."""

    def __init__(self, feeds):
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def quantize_int8(path, out, images, predictor):
    """Write the int8 file ``out`` of the fp32 file ``path``, calibrated on ``images`` (BGR uint8 arrays) prepared by
    ``predictor`` (an :mod:`inline_runtime` predictor of ``path``: its ``file_inputs``)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    names = predictor.backend.input_names
    feeds = [dict(zip(names, arrays, strict=True)) for image in images for arrays in predictor.file_inputs(image)]
    quiet = logging.getLogger()      # onnxruntime's quantiser warns per LayerNorm weight on the root logger
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        prepared = os.path.join(tmp, 'prepared.onnx')
        quant_pre_process(path, prepared, skip_symbolic_shape=True)
        quantize_static(prepared, out, _Images(feeds), quant_format=QuantFormat.QDQ, per_channel=True,
                        weight_type=QuantType.QInt8, activation_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax, op_types_to_quantize=list(QUANTISED_OPS))
    quiet.setLevel(level)
    meta = json.loads({p.key: p.value for p in onnx.load(path).metadata_props}[META_KEY])
    model = onnx.load(out)
    onnx.helper.set_model_props(model, {META_KEY: json.dumps(dict(meta, precision='int8',
                                                                  calibration_images=len(images)))})
    onnx.save(model, out)
    return len(feeds)
