"""ONNX export of the backbones, classifiers and detector/segmentor feature extractors, checked in onnxruntime.

Two exporters of torch (``torch.onnx.export``), both at opset :data:`OPSET`:

* ``'dynamo'`` (torch's default, ``dynamo=True``): ``torch.export`` of the model, then translation to
  ONNX. With ``dynamic=(min_hw, max_hw)`` the input's height and width are symbolic multiples of
  :data:`STRIDE` (``torch.export.Dim`` times 32) within that range. Swin's small-map rule (a shifted block
  shifts by ``ws // 2`` only when both sides of its map exceed the window) is decided in the graph by tensor
  ops on the map's sizes, so one file is right on both sides of it (also when ``torch.onnx.export`` is called
  directly). A choice made in Python from a feature map's size would be kept at the example's side by
  ``torch.export`` (and the ONNX file has no runtime guard), so :func:`export_onnx` still checks the file
  against eager at the range's corners and refuses a range over which the outputs disagree.
* ``'torchscript'`` (``dynamo=False``, the path of older deployment tools): ``torch.jit.trace`` at the
  example's size, then translation. Fixed size only: :func:`export_onnx` refuses ``dynamic`` with it (torch
  itself refuses InLine's dynamic depthwise convolution with dynamic axes).

Padding-aware backbones export with each image's ``(height, width)`` as a second graph input
(``image_shapes``, a (B, 2) int64 tensor; the masks and window partitions are then built in the graph,
with shapes that do not depend on the regions); without it they refuse. The outputs of a file are compared
with eager PyTorch by :func:`relative_errors`.
"""
import os

import numpy as np
import torch
from torch import nn

OPSET = 20     # torch 2.14's default for both exporters
STRIDE = 32    # the backbones' largest stride: dynamic heights and widths are multiples of it
EXPORTERS = ('dynamo', 'torchscript')


class ExtractFeat(nn.Module):
    """An mmdet detector's or mmseg segmentor's ``extract_feat`` (backbone and neck) as a module."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model.extract_feat(x)


def size_dims(min_hw, max_hw):
    """``dynamic_shapes`` for one (B, C, H, W) input: H = 32 h and W = 32 w, each within [min, max] (pixels,
    multiples of :data:`STRIDE`)."""
    dims = []
    for axis, lo, hi in zip('hw', min_hw, max_hw, strict=True):
        if lo % STRIDE or hi % STRIDE or not STRIDE <= lo <= hi:
            raise ValueError(f'dynamic {"height" if axis == "h" else "width"} range [{lo}, {hi}] must be multiples '
                             f'of {STRIDE}, at least {STRIDE}')
        dims.append(STRIDE * torch.export.Dim(axis, min=lo // STRIDE, max=hi // STRIDE))
    return ({2: dims[0], 3: dims[1]},)


def export_onnx(model, x, path, exporter='dynamo', dynamic=None, image_shapes=None):
    """Write ``model`` (eval mode) on the example input ``x`` to the ONNX file ``path`` through
    ``exporter``; ``dynamic=((min_h, min_w), (max_h, max_w))`` makes H and W symbolic (dynamo only).
    ``image_shapes`` (a padding-aware backbone): the example's regions, exported as the second input."""
    if exporter not in EXPORTERS:
        raise ValueError(f'exporter must be one of {EXPORTERS}, got {exporter!r}')
    if model.training:
        raise ValueError('export a model in eval mode (model.eval()): training mode has dropout and drop path')
    if dynamic is not None and any(getattr(m, 'inline_window_size', None) for m in model.modules()):
        raise NotImplementedError(
            'InLine attention in windows (inline_window_size) exports at a fixed size only: with dynamic sizes '
            'the window count is symbolic, and ONNX convolutions need a constant group count')
    if exporter == 'torchscript' and dynamic is not None:
        raise ValueError("the TorchScript exporter exports one fixed size here (it traces at the example's "
                             "size and cannot export InLine's dynamic depthwise convolution with dynamic axes): "
                             "use exporter='dynamo' for dynamic sizes")
    args, names = ((x,), ['input']) if image_shapes is None else ((x, image_shapes), ['input', 'image_shapes'])
    if exporter == 'torchscript':
        torch.onnx.export(model, args, path, dynamo=False, opset_version=OPSET, input_names=names)
        return
    dynamic_shapes = None if dynamic is None else size_dims(*dynamic) + (None,) * (len(args) - 1)
    torch.onnx.export(model, args, path, dynamo=True, opset_version=OPSET, input_names=names,
                      dynamic_shapes=dynamic_shapes, external_data=False)
    if dynamic is not None:
        check_range_corners(model, x, path, dynamic, image_shapes is not None)


def check_range_corners(model, x, path, dynamic, with_shapes=False, tolerance=1e-4):
    """Delete the file and raise ValueError unless it gives eager's numbers at both corners of the range.

    ``torch.export`` keeps the branch taken at the example's size when a choice made in Python from a
    feature map's size differs elsewhere in the range, and the ONNX file drops the runtime guard that
    ``torch.export`` records for it. Swin's window shift is decided in the graph (right over any range); this
    check is the net for any other such choice. A choice that is a threshold on a stage's map sides, which
    grow with H and W, is the same over the whole range if and only if it is the same at the smallest and
    the largest size; a different choice changes the outputs by far more than ``tolerance`` (rounding: ~1e-6).
    """
    session = onnxruntime_session(path)
    for hw in dynamic:
        corner = torch.randn(*x.shape[:2], *hw)
        inputs = (corner, torch.tensor([hw] * x.shape[0])) if with_shapes else (corner,)   # images fill the corner
        with torch.no_grad():
            try:
                error = max(relative_errors(run_onnx(session, *inputs), flat_outputs(model(*inputs))))
            except Exception as err:  # noqa: BLE001 - a shape specialised at the example's size fails to run
                error = f'{type(err).__name__}: {str(err)[:300]}'
        if isinstance(error, str) or error > tolerance:
            del session
            os.remove(path)
            raise ValueError(
                f'the dynamic range {dynamic[0]} .. {dynamic[1]} crosses a choice the model makes from its feature '
                f'map sizes, which the exported graph keeps at the example\'s size: the export disagrees with '
                f'eager at {hw[0]}x{hw[1]} ({error if isinstance(error, str) else f"relative error {error:.1e}"}); '
                f'export a narrower range (file deleted)')


SPINNING_KEYS = ('session.intra_op.allow_spinning', 'session.inter_op.allow_spinning')


def onnxruntime_session(path, threads=None, spinning=True):
    """An onnxruntime CPU session of the file (``threads``: intra-op threads, default onnxruntime's).

    ``spinning=False`` sets :data:`SPINNING_KEYS` to '0': the session's idle threads block instead of
    busy-waiting for the next run (onnxruntime's default), so that they take no CPU from another runtime that
    runs between its runs, e.g. eager PyTorch timed in the same process (whose threads they would otherwise
    slow down several times over on a machine with few cores)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    if not spinning:
        for key in SPINNING_KEYS:
            options.add_session_config_entry(key, '0')
    return ort.InferenceSession(str(path), options, providers=['CPUExecutionProvider'])


def session_spins(session):
    """Whether the idle threads of an onnxruntime ``session`` may spin: unless both :data:`SPINNING_KEYS` are '0'
    (unset means onnxruntime's default, spinning)."""
    options = session.get_session_options()
    for key in SPINNING_KEYS:
        try:
            if options.get_session_config_entry(key) != '0':
                return True
        except RuntimeError:   # not set
            return True
    return False


def run_onnx(session, *inputs):
    """The file's outputs on ``inputs`` (the images, then the regions if exported with them) as numpy arrays."""
    return session.run(None, {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs, strict=False)})


def flat_outputs(outputs):
    """A model's output (tensor, or nested tuples/lists of tensors) as a flat list of numpy arrays."""
    if isinstance(outputs, torch.Tensor):
        return [outputs.detach().numpy()]
    return [array for item in outputs for array in flat_outputs(item)]


def relative_errors(outputs, references):
    """Per output: ``max |output - reference| / max |reference|``; raise if the counts or shapes differ."""
    if len(outputs) != len(references):
        raise ValueError(f'{len(outputs)} outputs against {len(references)} references')
    errors = []
    for out, ref in zip(outputs, references, strict=True):
        if out.shape != ref.shape:
            raise ValueError(f'output of shape {out.shape} against a reference of shape {ref.shape}')
        errors.append(float(np.abs(out - ref).max() / np.abs(ref).max()))
    return errors
