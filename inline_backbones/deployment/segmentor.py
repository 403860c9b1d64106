"""A trained mmseg segmentor (``EncoderDecoder``: UperNet, Semantic FPN, ...) as one graph, and mmseg's own
inference to check it against.

The file (:class:`WholeSegmentor`) takes raw pixels ``(1, 3, H, W)`` (float32 0..255, BGR as OpenCV reads them),
any H and W from the backbone's minimum up (no multiple needed), and computes, as mmseg's ``whole`` inference:
the channel swap and normalisation of the data preprocessor, ``extract_feat`` (backbone and neck), the decode head,
the bilinear resize of the logits to the input (``align_corners`` of the head), and the label map: ``argmax`` over
classes (one output channel: ``sigmoid > threshold``). Outputs ``labels`` (1, H, W) int64 and, when asked or needed,
``logits`` (1, C, H, W) float32. The runtime helper (:mod:`inline_runtime.segmentation`) completes: the config's
test resize before the file and the resize of the logits back to the original image after it (bilinear, as mmseg's
``postprocess_result``), the padding of images below the minimum size and the crop back, and the ``slide`` mode
(crops of ``crop_size`` every ``stride``, logits summed and divided by the count, as mmseg's ``slide_inference``).
The auxiliary head is not exported (mmseg does not use it at test time). Adaptive pooling (UperNet's pyramid) and
mmseg's integral upsampling (Semantic FPN's heads) are rewritten (:mod:`.rewrites`) so that one file serves every
size.
"""
import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.tool_inputs import ToolInputError
from .metadata import dataset_meta, input_meta, resize_meta
from .rewrites import rewrite_for_export


class WholeSegmentor(nn.Module):
    """``image (1, 3, H, W)`` raw BGR -> ``labels (1, H, W)`` [, ``logits (1, C, H, W)``] (see the module).

    A padding-aware backbone (the configs' default) keeps its mode: the file's second input ``image_shape``
    (1, 2) int64 is the image's own (height, width) inside the input (the whole input, unless the helper padded a
    small image), so the windows and masks are the ones the trained model used."""

    def __init__(self, segmentor, with_logits=False):
        super().__init__()
        pre = segmentor.data_preprocessor
        meta = input_meta(pre)
        self.to_rgb = meta['to_rgb']
        self.register_buffer('mean', torch.tensor(meta['mean']).view(1, 3, 1, 1), persistent=False)
        self.register_buffer('std', torch.tensor(meta['std']).view(1, 3, 1, 1), persistent=False)
        self.segmentor = copy.deepcopy(segmentor)
        self.padding_aware = bool(getattr(segmentor.backbone, 'padding_aware', False))
        rewrite_for_export(self.segmentor)
        head = self.segmentor.decode_head
        self.align_corners = head.align_corners
        self.threshold = getattr(head, 'threshold', None) or 0.3   # mmseg's default for one output channel
        self.with_logits = with_logits

    def forward(self, image, image_shape=None):
        x = image.flip(1) if self.to_rgb else image
        x = (x - self.mean) / self.std
        feats = self.segmentor.backbone(x, image_shape) if self.padding_aware else self.segmentor.backbone(x)
        if self.segmentor.with_neck:
            feats = self.segmentor.neck(feats)
        logits = self.segmentor.decode_head(feats)
        logits = F.interpolate(logits, size=x.shape[2:], mode='bilinear', align_corners=self.align_corners)
        if logits.shape[1] > 1:
            labels = logits.argmax(1)
        else:
            labels = (logits.sigmoid() > self.threshold).to(torch.int64)[:, 0]
        return (labels, logits) if self.with_logits else labels


def check_segmentor(model):
    from mmseg.models.segmentors import EncoderDecoder

    if not isinstance(model, EncoderDecoder) or type(model).__name__ != 'EncoderDecoder':
        raise ToolInputError('whole-model export takes mmseg\'s EncoderDecoder segmentors (UperNet, Semantic FPN, '
                             f'...); this config builds {type(model).__name__}')


def prepare(model, cfg, checkpoint_meta=None, with_logits=False):
    """``(module, meta)`` for a segmentor: the graph (:class:`WholeSegmentor`, logits added where the helper needs
    them: a test resize or the ``slide`` mode) and its metadata."""
    check_segmentor(model)
    resize = resize_meta(cfg)
    test_cfg = dict(model.test_cfg or {})
    mode = test_cfg.get('mode', 'whole')
    if mode not in ('whole', 'slide'):
        raise ToolInputError(f'test_cfg mode {mode!r}: the helper runs whole and slide inference')
    needs_logits = resize is not None or mode == 'slide'
    module = WholeSegmentor(model, with_logits or needs_logits).eval()
    pre_test = dict(getattr(model.data_preprocessor, 'test_cfg', None) or {})
    min_size = getattr(model.backbone, 'min_input_size', 32)
    pad_size = pre_test.get('size')
    meta = dict(
        task='segmentation', model=type(model.decode_head).__name__, config=cfg.filename.split('/')[-1],
        **dataset_meta(cfg, checkpoint_meta),
        input=dict(input_meta(model.data_preprocessor), size_divisor=pre_test.get('size_divisor'),
                   min_size=min_size, pad_size=list(pad_size) if pad_size else [min_size, min_size]),
        resize=resize,
        test_cfg=dict(mode=mode, crop_size=_pair(test_cfg.get('crop_size')), stride=_pair(test_cfg.get('stride'))),
        num_classes=int(model.decode_head.out_channels), align_corners=bool(module.align_corners),
        threshold=float(module.threshold), input_names=['image', 'image_shape'],
        outputs=['labels', 'logits'] if module.with_logits else ['labels'],
        in_file=['BGR to RGB' if module.to_rgb else 'channels as read', 'normalisation', 'backbone', 'neck',
                 f'decode head ({type(model.decode_head).__name__})', 'resize of the logits to the input',
                 'argmax' if model.decode_head.out_channels > 1 else 'sigmoid > threshold'],
        helper=[s for s, on in [('read the image (OpenCV, BGR)', True),
                                ('the test resize (mmcv Resize, OpenCV bilinear)', resize is not None),
                                ('pad small images and crop back', True),
                                (f'slide crops {test_cfg.get("crop_size")} every {test_cfg.get("stride")}',
                                 mode == 'slide'),
                                ('resize of the logits to the original image, argmax', resize is not None)] if on])
    return module, meta


def _pair(value):
    return None if value is None else list(value)


def example_input(shape=(256, 320)):
    """The example the graph is traced at (an ordinary size, not a multiple of 32 on one side) and its region."""
    torch.manual_seed(0)
    return torch.rand(1, 3, *shape) * 255, torch.tensor([shape])


def dynamic_shapes(min_side, max_side):
    """Height and width symbolic within [min_side, max_side], any value (no multiple of a stride needed)."""
    h = torch.export.Dim('height', min=min_side, max=max_side)
    w = torch.export.Dim('width', min=min_side, max=max_side)
    return {2: h, 3: w}, None


def reference(model, cfg, image):
    """mmseg's own inference (``inference_model``: the config's test pipeline, ``test_step``) on a BGR uint8
    image: ``labels`` (H, W) int64 and ``logits`` (C, H, W) float32 at the image's size."""
    from mmseg.apis import inference_model

    model.cfg = cfg
    sample = inference_model(model, image)
    return dict(labels=sample.pred_sem_seg.data[0].cpu().numpy().astype(np.int64),
                logits=sample.seg_logits.data.cpu().numpy())


def compare(result, ref, min_agreement=0.999, logit_tolerance=1e-3):
    """``(ok, summary)``: the label maps agree on at least ``min_agreement`` of the pixels and, where both have
    logits, ``max |logits - ref| / max |ref|`` is at most ``logit_tolerance`` (fp32 rounding across runtimes and
    a bilinear resize: ~1e-6; a wrong graph: ~1e-1)."""
    if result['labels'].shape != ref['labels'].shape:
        return False, f'label map of shape {result["labels"].shape}, mmseg\'s {ref["labels"].shape}'
    agreement = float((result['labels'] == ref['labels']).mean())
    summary = f'labels agree on {agreement:.4%} of {ref["labels"].size} pixels'
    ok = agreement >= min_agreement
    if result.get('logits') is not None:
        error = float(np.abs(result['logits'] - ref['logits']).max() / np.abs(ref['logits']).max())
        summary += f', logits max relative error {error:.1e}'
        ok = ok and error <= logit_tolerance
    return ok, summary
