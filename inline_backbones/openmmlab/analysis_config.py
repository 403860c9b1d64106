"""The attention analysis's config route: an InLine backbone's arguments and input normalisation from an mmdet/mmseg
config's ``model``, and the config's test ``Resize`` as a function of the image (mmcv's ``imrescale`` /
``imresize``, as the pipeline runs them)."""
import copy
import functools

import mmcv
from mmengine.config import Config


def _read(config):
    return Config.fromfile(config) if isinstance(config, str) else config


def config_backbone(config, class_name):
    """``(kwargs, norm)``: the config's ``model.backbone`` arguments (without ``type``, which must name
    ``class_name``) and its data preprocessor's ``mean``, ``std``, ``bgr_to_rgb`` (those it sets)."""
    cfg = _read(config)
    kwargs = copy.deepcopy(cfg.model.backbone.to_dict())
    if kwargs.pop('type', '').split('.')[-1] != class_name:
        raise ValueError(f'{config}: model.backbone is not an {class_name}')
    preprocessor = cfg.model.get('data_preprocessor') or {}
    return kwargs, {k: preprocessor[k] for k in ('mean', 'std', 'bgr_to_rgb') if k in preprocessor}


def config_resize_args(config):
    """``(scale, keep_ratio)`` of the config's test pipeline ``Resize``, or None when it does not resize."""
    cfg = _read(config)
    pipeline = cfg.get('test_pipeline') or cfg.test_dataloader.dataset.get('pipeline', [])
    for step in pipeline:
        if step['type'].split('.')[-1] == 'Resize':
            return tuple(step['scale']), step.get('keep_ratio', False)
    return None


def config_resize(config):
    """The config's test ``Resize`` as a function of a BGR image (``imrescale`` keeping the ratio within ``scale``,
    else ``imresize`` to ``scale`` = (W, H)), or None when the pipeline does not resize."""
    args = config_resize_args(config)
    if args is None:
        return None
    scale, keep_ratio = args
    return functools.partial(mmcv.imrescale, scale=scale) if keep_ratio else functools.partial(mmcv.imresize,
                                                                                                size=scale)
