"""The metadata of a whole exported model, read from its config, data preprocessor and checkpoint, and written
into the ONNX file (``metadata_props``, key :data:`inline_runtime.metadata.META_KEY`; the fields:
:mod:`inline_runtime.metadata`).
"""
import onnx

from inline_runtime.metadata import FORMAT, META_KEY

from ..data.tool_inputs import ToolInputError

# Test-pipeline steps the runtime helper reproduces (or that only load annotations / pack the sample).
PIPELINE_STEPS = {'LoadImageFromFile': None, 'Resize': 'resize', 'LoadAnnotations': None,
                  'PackSegInputs': None, 'PackDetInputs': None}


def test_pipeline(cfg):
    """The config's test pipeline (``test_dataloader.dataset.pipeline``, else ``test_pipeline``)."""
    pipeline = cfg.get('test_dataloader', {}).get('dataset', {}).get('pipeline') or cfg.get('test_pipeline')
    if not pipeline:
        raise ToolInputError(f'{_name(cfg)}: no test pipeline (test_dataloader.dataset.pipeline or test_pipeline)')
    return pipeline


def resize_meta(cfg):
    """The test pipeline's resize as the runtime helper reproduces it (mmcv's ``Resize``), or None; a
    ToolInputError naming any step it does not reproduce."""
    resize = None
    for step in test_pipeline(cfg):
        kind = step['type'].split('.')[-1]
        if kind not in PIPELINE_STEPS:
            raise ToolInputError(
                f'{_name(cfg)}: the test pipeline\'s {kind} step is not reproduced by the runtime helper '
                f'(it reproduces {", ".join(PIPELINE_STEPS)}): remove it from the test pipeline before exporting')
        if kind == 'LoadImageFromFile' and step.get('color_type', 'color') != 'color':
            raise ToolInputError(f'{_name(cfg)}: LoadImageFromFile color_type={step["color_type"]!r}; the runtime '
                                 "helper reads images as OpenCV's IMREAD_COLOR (color_type='color')")
        if PIPELINE_STEPS[kind] == 'resize':
            if step.get('interpolation', 'bilinear') != 'bilinear' or step.get('backend', 'cv2') != 'cv2':
                raise ToolInputError(f'{_name(cfg)}: Resize with interpolation {step.get("interpolation")!r}, '
                                     f'backend {step.get("backend")!r}: the helper reproduces bilinear with cv2 only')
            resize = dict(scale=_plain(step.get('scale')), scale_factor=_plain(step.get('scale_factor')),
                          keep_ratio=bool(step.get('keep_ratio', False)))
    return resize


def _name(cfg):
    return cfg.filename or 'the config'


def _plain(value):
    return list(value) if isinstance(value, (tuple, list)) else value


def input_meta(data_preprocessor):
    """What the file's image input is: raw BGR pixels, converted and normalised in the file as the data
    preprocessor did; the raw value the helper pads with (the mean: 0 after normalising)."""
    mean = data_preprocessor.mean.flatten().tolist()
    std = data_preprocessor.std.flatten().tolist()
    rgb = bool(channel_conversion(data_preprocessor))
    return dict(channel_order='bgr', mean=mean, std=std, to_rgb=rgb,
                pad_value=mean[::-1] if rgb else mean)   # the mean in the input's (BGR) channel order


def channel_conversion(data_preprocessor):
    """Whether the data preprocessor swaps BGR and RGB (mmengine's ``_channel_conversion``; mmseg's own
    ``channel_conversion``)."""
    if hasattr(data_preprocessor, '_channel_conversion'):
        return data_preprocessor._channel_conversion
    return data_preprocessor.channel_conversion


def dataset_meta(cfg, checkpoint_meta=None):
    """``classes`` and ``palette``: the checkpoint's ``dataset_meta`` (what mmengine's runner saved), else the
    config's dataset ``metainfo``, else the dataset class's ``METAINFO``."""
    meta = dict((checkpoint_meta or {}).get('dataset_meta') or {})
    if not meta.get('classes'):
        dataset = cfg.get('test_dataloader', {}).get('dataset', {})
        meta = dict(dataset.get('metainfo') or {})
        if not meta.get('classes'):
            meta = _class_metainfo(cfg, dataset.get('type'))
    classes = list(meta.get('classes') or [])
    palette = [list(map(int, c)) for c in meta.get('palette') or []]
    return dict(classes=classes, palette=palette)


def _class_metainfo(cfg, dataset_type):
    if not dataset_type:
        return {}
    if cfg.get('default_scope') == 'mmdet':
        from mmdet.registry import DATASETS
    else:
        from mmseg.registry import DATASETS
    cls = DATASETS.get(dataset_type)
    return dict(getattr(cls, 'METAINFO', {}) or {})


def write_metadata(path, meta):
    """Store ``meta`` (a dict; ``format`` added) in the ONNX file's ``metadata_props``."""
    import json

    model = onnx.load(path)
    props = {p.key: p.value for p in model.metadata_props}
    props[META_KEY] = json.dumps(dict(format=FORMAT, **meta))
    onnx.helper.set_model_props(model, props)
    onnx.save(model, path)
