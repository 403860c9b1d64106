"""Whole-model export of a trained mmseg segmentor or mmdet detector: the graph of the task's module
(:mod:`.segmentor`, :mod:`.detector`), torch's ONNX exporter with dynamic height and width, the metadata written
into the file, and the check of the file (run by :mod:`inline_runtime`, as a serving machine runs it) against
mmseg's / mmdet's own inference on the same images; a file that disagrees is deleted.

Each task module provides ``prepare(model, cfg, checkpoint_meta, **options) -> (module, meta)``,
``example_input()``, ``dynamic_shapes(min_side, max_side)``, ``reference(model, cfg, image)`` and
``compare(result, reference) -> (ok, summary)``.
"""
import importlib
import os

import torch

from ..models.tokens.graph_mode import padding_at_any_size
from .metadata import write_metadata
from .onnx_export import OPSET

TASK_MODULES = {'mmseg': 'segmentor', 'mmdet': 'detector'}


class WholeExportMismatch(ValueError):
    """The exported file's results differ from mmseg's / mmdet's on a check image (the file was deleted)."""


def task_module(task):
    return importlib.import_module(f'.{TASK_MODULES[task]}', __package__)


def load_task_model(config, checkpoint=None, cfg_options=None):
    """``(cfg, task, model, checkpoint_meta)``: the config's model in eval mode with the checkpoint's weights
    (strictly; the backbone's pretrained ``init_cfg`` is not loaded), as mmdet/mmseg's inference builds it."""
    from mmengine.runner import load_checkpoint

    from ..openmmlab.task_tools import build_task_model, read_config

    cfg = read_config(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    task, model, _ = build_task_model(cfg)
    meta = {}
    if checkpoint:
        meta = load_checkpoint(model, checkpoint, map_location='cpu', strict=True).get('meta', {})
    model.cfg = cfg
    return cfg, task, model.eval(), meta


def export_whole(cfg, task, model, checkpoint_meta, out, min_side=32, max_side=4096, report=print, **options):
    """Write the whole model to the ONNX file ``out`` (H and W dynamic within [min_side, max_side]); its
    metadata. The runtime helper pads smaller images to the minimum, as mmseg pads images below the backbone's
    minimum (32 px): with the same padding the results are mmseg's (a padding-aware backbone masks it, but the
    heads see it: UperNet's pyramid pooling averages over it, so a larger padding changes the prediction). A graph
    that holds only above some size (InLine-CSwin's stripes of 7 cells at stride 16 need about 113 px a side) makes
    ``torch.export`` refuse the range: the minimum is then doubled, with a note through ``report``, up to the
    example's side, and images below it differ from mmseg's (padded more)."""
    tasks = task_module(task)
    module, meta = tasks.prepare(model, cfg, checkpoint_meta, **options)
    example = tasks.example_input()
    while True:
        try:
            with torch.no_grad(), padding_at_any_size():
                torch.onnx.export(module, example, out, dynamo=True, opset_version=OPSET,
                                  input_names=meta.get('input_names', ['image']), output_names=meta['outputs'],
                                  dynamic_shapes=tasks.dynamic_shapes(min_side, max_side), external_data=False)
            break
        except Exception as err:  # noqa: BLE001 - torch's exporter wraps the constraint error in its own
            if not _range_refused(err) or 2 * min_side > min(example[0].shape[-2:]):
                raise
            report(f'note: the graph does not hold down to {min_side} px a side; trying {2 * min_side} (smaller '
                   'images are padded to it)')
            min_side *= 2
    meta['input']['pad_size'] = [max(s, min_side) for s in meta['input'].get('pad_size') or (0, 0)]
    meta['dynamic_range'] = [min_side, max_side]
    write_metadata(out, meta)
    return meta


def _range_refused(err):
    """Whether ``torch.export`` refused the dynamic range (a guard on the sizes narrower than the range)."""
    while err is not None:
        text = f'{type(err).__name__}: {err}'
        if 'ConstraintViolation' in text or 'Cannot create Dim' in text or 'Constraints violated' in text:
            return True
        err = err.__cause__ or err.__context__
    return False


def check_whole(out, cfg, task, model, images, runtime='onnxruntime', precision='fp32', report=print, delete=True):
    """Run the file (``inline_runtime``) and mmdet/mmseg on each (name, BGR image), one line each through
    ``report``; if any disagrees, delete the file and raise :class:`WholeExportMismatch` (``delete=False``: only
    report). Returns the lines."""
    from inline_runtime import load

    tasks = task_module(task)
    predictor = load(out, runtime, precision)
    summaries, failed = [], []
    for name, image in images:
        result = predictor.predict(image, **({'logits': True} if task == 'mmseg' and predictor.has_logits else {}))
        ok, summary = tasks.compare(result, tasks.reference(model, cfg, image))
        mark = '' if ok else ('  <- DISAGREES' if delete else '  (below the fp32 bar)')
        line = f'{name} ({image.shape[0]}x{image.shape[1]}): {summary}{mark}'
        report(line)
        summaries.append(line)
        if not ok:
            failed.append(name)
    if failed and delete:
        del predictor
        os.remove(out)
        raise WholeExportMismatch(f'{out}: the file disagrees with {task} on {", ".join(failed)} (file deleted)')
    return summaries
