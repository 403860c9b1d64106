"""The metadata an exported file carries: one JSON object in the ONNX file's ``metadata_props`` under
:data:`META_KEY` (onnxruntime: ``custom_metadata_map``; OpenVINO keeps it in the model's ``rt_info`` under
``framework``, also in IR converted from the ONNX file).

Fields (written by ``inline_backbones.deployment``; ``format`` is :data:`FORMAT`):

* ``task``: ``'segmentation'`` or ``'detection'``; ``model``: the mmseg/mmdet model type (``EncoderDecoder``,
  ``RetinaNet``, ...); ``config``: the config's file name; ``classes``, ``palette`` (RGB triples).
* ``input``: what the file takes: raw pixels 0..255 as float32 (1, 3, H, W) in ``channel_order`` (``'bgr'``, as
  OpenCV reads them; the file converts and normalises as the data preprocessor did), ``size_divisor`` (H and W
  must be multiples of it; None: any size from ``min_size``), ``pad_value`` (per channel, the raw value the
  helper pads with: the normalisation mean, so that padding is 0 after normalising, as mmdet pads).
* ``resize``: the config's test resize (mmcv's ``Resize``: ``scale`` and ``keep_ratio``, or ``scale_factor``),
  or None.
* ``test_cfg``: segmentation: ``mode`` (``'whole'`` / ``'slide'``), ``crop_size``, ``stride``; detection:
  ``score_thr`` the file applied.
* ``outputs``: the file's output names in order; ``in_file`` and ``helper``: what the file computes and what this
  package completes (printed by the export tool and ``python -m inline_runtime --describe``).
"""
import json

META_KEY = 'inline_runtime'
FORMAT = 1
TASKS = ('segmentation', 'detection')


def parse_metadata(text, source):
    """The metadata dict from its JSON text; ValueError naming ``source`` if it is not ours."""
    if text is None:
        raise ValueError(f'{source} has no {META_KEY!r} metadata: it was not written by this repository\'s whole-model '
                         'export (tools/deployment/export_onnx.py --whole); a backbone-only file has no heads to run')
    meta = json.loads(text)
    if meta.get('format') != FORMAT or meta.get('task') not in TASKS:
        raise ValueError(f'{source}: metadata format {meta.get("format")!r}, task {meta.get("task")!r}; this '
                         f'inline_runtime reads format {FORMAT} for tasks {TASKS}: export the file again')
    return meta


def read_metadata(path):
    """The metadata of an ONNX file, read with onnxruntime (or with OpenVINO when onnxruntime is absent)."""
    path = str(path)
    if path.endswith('.onnx'):
        try:
            import onnxruntime as ort
        except ImportError:
            pass
        else:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            session = ort.InferenceSession(path, options, providers=['CPUExecutionProvider'])
            return parse_metadata(session.get_modelmeta().custom_metadata_map.get(META_KEY), path)
    import openvino as ov

    return openvino_metadata(ov.Core().read_model(path), path)


def openvino_metadata(model, source):
    """The metadata of an OpenVINO model read from our ONNX file (or IR saved from one)."""
    key = ['framework', META_KEY]
    return parse_metadata(model.get_rt_info(key).astype(str) if model.has_rt_info(key) else None, source)
