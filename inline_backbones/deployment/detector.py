"""A trained mmdet RetinaNet, Mask R-CNN or Cascade Mask R-CNN as one graph, and mmdet's own inference to check it
against.

Every file takes the resized image padded bottom/right to a multiple of the data preprocessor's
``pad_size_divisor`` (32) with the normalisation mean (``image`` (1, 3, H, W) float32 raw BGR 0..255), the resized
image's own ``img_shape`` (h, w) int64 and the resize's ``scale_factor`` (w_scale, h_scale) float32, and computes, as
mmdet's ``predict``: the channel swap and normalisation of the data preprocessor (the padding becomes 0, as mmdet
pads after normalising), ``extract_feat`` (a padding-aware backbone told ``img_shape``), then

* RetinaNet (:class:`WholeRetinaNet`): the head, the anchors of the prior generator on the feature sizes, per level
  (``_predict_by_feat_single``) the sigmoid scores of every (anchor, class) above ``score_thr``, the best
  ``nms_pre`` of them (``filter_scores_and_topk``: taken here as the top ``nms_pre`` of all scores, then those above
  the threshold: the same set, in the same order), the boxes decoded (``DeltaXYWHBBoxCoder``, clipped to
  ``img_shape``); then (``_bbox_post_process``) the boxes times ``1 / scale_factor``, those of a side ``<=
  min_bbox_size`` dropped, class-aware NMS and the best ``max_per_img``.
* Mask R-CNN (:class:`WholeMaskRCNN`): the RPN's proposals the same way (one class, no threshold, NMS across levels
  kept apart), RoIAlign on each proposal's FPN level (``SingleRoIExtractor``), the bbox head, softmax scores, each
  (proposal, class) box decoded and clipped, those above ``score_thr``, class-aware NMS, ``max_per_img``
  (``multiclass_nms``), the mask head on the detections (boxes in the resized image), the sigmoid of each
  detection's class channel; the boxes divided by ``scale_factor`` (the mask head's rescale).
* Cascade Mask R-CNN (:class:`WholeCascadeMaskRCNN`): the stages of ``CascadeRoIHead`` (boxes regressed by each
  stage for the next, logits averaged) and the stages' mask probabilities averaged.

Class-aware NMS is mmcv's ``batched_nms`` (each class's boxes shifted by ``label * (max coordinate + 1)``, one NMS)
with ``torchvision.ops.nms``, which the exporter writes as ONNX ``NonMaxSuppression`` (mmcv's greedy algorithm, the
same IoU); RoIAlign is ``torchvision.ops.roi_align`` (mmcv's ``RoIAlign`` with ``aligned``, ``sampling_ratio``),
written as ONNX ``RoiAlign`` (``half_pixel``). Outputs ``boxes`` (N, 4) xyxy in the original image, ``scores`` (N,),
``labels`` (N,) int64, best first, and for the mask detectors ``masks`` (N, 28, 28) probabilities. The runtime
helper (:mod:`inline_runtime.detection`) completes the test resize and the padding before the file and pastes the
masks into the image (mmdet's ``_do_paste_mask``) after it, thresholded at ``mask_thr_binary``.
"""
import copy

import numpy as np
import torch
import torchvision
from torch import nn

from ..data.tool_inputs import ToolInputError
from .metadata import dataset_meta, input_meta, resize_meta

DIVISOR = 32   # mmdet's DetDataPreprocessor pad_size_divisor in every config here


def decode_deltas(priors, deltas, means, stds, img_shape, wh_ratio_clip=16 / 1000):
    """mmdet's ``delta2bbox`` (``DeltaXYWHBBoxCoder``) for (N, 4) priors and deltas, clipped to ``img_shape``
    (a (2,) tensor: h, w)."""
    deltas = deltas * deltas.new_tensor(stds) + deltas.new_tensor(means)
    pxy = (priors[:, :2] + priors[:, 2:]) * 0.5
    pwh = priors[:, 2:] - priors[:, :2]
    max_ratio = float(np.abs(np.log(wh_ratio_clip)))
    gxy = pxy + pwh * deltas[:, :2]
    gwh = pwh * deltas[:, 2:].clamp(min=-max_ratio, max=max_ratio).exp()
    boxes = torch.cat([gxy - gwh * 0.5, gxy + gwh * 0.5], dim=-1).clamp(min=0)
    limit = img_shape.flip(0).to(boxes.dtype).repeat(2)      # (w, h, w, h)
    return torch.minimum(boxes, limit)


def batched_nms(boxes, scores, idxs, iou_threshold):
    """mmcv's ``batched_nms`` (class-aware by offsets, below ``split_thr``): indices kept, best first. The largest
    coordinate is taken with a 0 joined (the boxes are clipped at 0: the same value) so that no boxes reduce too."""
    offsets = idxs.to(boxes.dtype) * (torch.cat([boxes.reshape(-1), boxes.new_zeros(1)]).max() + 1)
    return torchvision.ops.nms(boxes + offsets[:, None], scores, iou_threshold)


class WholeDetector(nn.Module):
    """The data preprocessor's channel swap and normalisation, and ``extract_feat`` (the backbone told the image's
    region when it is padding-aware, as mmdet's ``RegionDetDataPreprocessor`` tells it)."""

    def __init__(self, detector):
        super().__init__()
        meta = input_meta(detector.data_preprocessor)
        self.to_rgb = meta['to_rgb']
        self.register_buffer('mean', torch.tensor(meta['mean']).view(1, 3, 1, 1), persistent=False)
        self.register_buffer('std', torch.tensor(meta['std']).view(1, 3, 1, 1), persistent=False)
        self.detector = copy.deepcopy(detector)
        self.padding_aware = bool(getattr(self.detector.backbone, 'padding_aware', False))

    def features(self, image, img_shape):
        x = image.flip(1) if self.to_rgb else image
        x = (x - self.mean) / self.std
        if self.padding_aware:
            return self.detector.neck(self.detector.backbone(x, image_shapes=img_shape.view(1, 2)))
        return self.detector.extract_feat(x)


class WholeRetinaNet(WholeDetector):
    """``image, img_shape, scale_factor`` -> ``boxes, scores, labels`` (see the module)."""

    def __init__(self, detector):
        super().__init__(detector)
        head = self.detector.bbox_head
        self.cfg = nms_settings(head.test_cfg)
        self.coder = coder_settings(head.bbox_coder)

    def forward(self, image, img_shape, scale_factor):
        head = self.detector.bbox_head
        cls_scores, bbox_preds = head(self.features(image, img_shape))
        priors = head.prior_generator.grid_priors([c.shape[-2:] for c in cls_scores], dtype=image.dtype,
                                                  device=image.device)
        num_classes = head.cls_out_channels
        level_boxes, level_scores, level_labels = [], [], []
        for cls_score, bbox_pred, anchors in zip(cls_scores, bbox_preds, priors, strict=True):
            scores, index = top_scores(cls_score[0].permute(1, 2, 0).reshape(-1).sigmoid(), self.cfg['nms_pre'])
            keep = scores > self.cfg['score_thr']
            scores, index = scores[keep], index[keep]
            anchor = index // num_classes
            deltas = bbox_pred[0].permute(1, 2, 0).reshape(-1, 4)[anchor]
            level_boxes.append(decode_deltas(anchors[anchor], deltas, *self.coder, img_shape))
            level_scores.append(scores)
            level_labels.append(index % num_classes)
        boxes, scores, labels = torch.cat(level_boxes), torch.cat(level_scores), torch.cat(level_labels)
        boxes = boxes * (1 / scale_factor.double()).to(boxes.dtype).repeat(2)    # mmdet: * float32(1 / s)
        return post_process(boxes, scores, labels, self.cfg)


class WholeMaskRCNN(WholeDetector):
    """``image, img_shape, scale_factor`` -> ``boxes, scores, labels, masks`` (see the module)."""

    def __init__(self, detector):
        super().__init__(detector)
        rpn, roi = self.detector.rpn_head, self.detector.roi_head
        self.rpn_cfg = nms_settings(rpn.test_cfg)
        self.rpn_coder = coder_settings(rpn.bbox_coder)
        self.rcnn_cfg = nms_settings(roi.test_cfg)
        self.mask_thr_binary = float(roi.test_cfg.get('mask_thr_binary', 0.5))

    def proposals(self, feats, img_shape):
        """mmdet's ``RPNHead.predict_by_feat`` (no rescale): (P, 4) boxes in the resized image."""
        rpn = self.detector.rpn_head
        cls_scores, bbox_preds = rpn(feats)
        priors = rpn.prior_generator.grid_priors([c.shape[-2:] for c in cls_scores], dtype=feats[0].dtype,
                                                 device=feats[0].device)
        level_boxes, level_scores, level_ids = [], [], []
        for level, (cls_score, bbox_pred, anchors) in enumerate(zip(cls_scores, bbox_preds, priors, strict=True)):
            scores, index = top_scores(cls_score[0].permute(1, 2, 0).reshape(-1).sigmoid(), self.rpn_cfg['nms_pre'])
            deltas = bbox_pred[0].permute(1, 2, 0).reshape(-1, 4)[index]
            level_boxes.append(decode_deltas(anchors[index], deltas, *self.rpn_coder, img_shape))
            level_scores.append(scores)
            level_ids.append(torch.full_like(index, level))
        boxes, _, _ = post_process(torch.cat(level_boxes), torch.cat(level_scores), torch.cat(level_ids),
                                   self.rpn_cfg)
        return boxes

    def forward(self, image, img_shape, scale_factor):
        feats = self.features(image, img_shape)
        boxes, scores, labels = self.detect(feats, self.proposals(feats, img_shape), img_shape)
        return boxes / scale_factor.repeat(2), scores, labels, self.mask_probs(feats, boxes, labels)

    def detect(self, feats, rois, img_shape):
        """The bbox head on the proposals: detections in the resized image."""
        roi = self.detector.roi_head
        cls_score, bbox_pred = roi.bbox_head(extract_rois(roi.bbox_roi_extractor, feats, rois))
        return self.select(cls_score, bbox_pred, rois, roi.bbox_head, img_shape)

    def select(self, cls_score, bbox_pred, rois, head, img_shape):
        """mmdet's ``BBoxHead._predict_by_feat_single`` without rescale and ``multiclass_nms``: softmax scores, each
        (roi, class) box decoded and clipped, those above ``score_thr``, class-aware NMS, the best ``max_per_img``."""
        scores = cls_score.softmax(-1)[:, :-1]
        num_rois, num_classes = scores.shape
        per_class = 1 if head.reg_class_agnostic else num_classes
        boxes = decode_deltas(rois.repeat_interleave(per_class, dim=0), bbox_pred.reshape(-1, 4),
                              *coder_settings(head.bbox_coder), img_shape).view(num_rois, per_class, 4)
        boxes = boxes.expand(num_rois, num_classes, 4).reshape(-1, 4)
        labels = torch.arange(num_classes, device=scores.device).repeat(num_rois)
        scores = scores.reshape(-1)
        valid = scores > self.rcnn_cfg['score_thr']
        return post_process(boxes[valid], scores[valid], labels[valid], self.rcnn_cfg)

    def mask_probs(self, feats, boxes, labels):
        """(N, 28, 28): the mask head's probabilities of each detection's class."""
        roi = self.detector.roi_head
        return class_masks(roi.mask_head(extract_rois(roi.mask_roi_extractor, feats, boxes)), labels,
                           roi.mask_head).sigmoid()


class WholeCascadeMaskRCNN(WholeMaskRCNN):
    """Cascade Mask R-CNN (mmdet's ``CascadeRoIHead.predict``): each stage's bbox head on the boxes the stage before
    regressed (the class of its highest logit, clipped to the image), the classification logits averaged over the
    stages, the last stage's boxes; the mask probabilities averaged over the stages' mask heads."""

    def detect(self, feats, rois, img_shape):
        roi = self.detector.roi_head
        logits = []
        for stage in range(roi.num_stages):
            head = roi.bbox_head[stage]
            cls_score, bbox_pred = head(extract_rois(roi.bbox_roi_extractor[stage], feats, rois))
            logits.append(cls_score)
            if stage < roi.num_stages - 1:
                if not head.reg_class_agnostic:
                    label = cls_score[:, :-1].argmax(1, keepdim=True) * 4
                    bbox_pred = bbox_pred.gather(1, label + torch.arange(4, device=label.device))
                rois = decode_deltas(rois, bbox_pred, *coder_settings(head.bbox_coder), img_shape)
        return self.select(sum(logits) / float(roi.num_stages), bbox_pred, rois, roi.bbox_head[-1], img_shape)

    def mask_probs(self, feats, boxes, labels):
        roi = self.detector.roi_head
        probs = [roi.mask_head[stage](extract_rois(roi.mask_roi_extractor[stage], feats, boxes)).sigmoid()
                 for stage in range(roi.num_stages)]
        return class_masks(torch.stack(probs).mean(0), labels, roi.mask_head[-1])


def class_masks(mask_preds, labels, mask_head):
    """(N, C, m, m) -> (N, m, m): each detection's class (the one channel of a class-agnostic head)."""
    if mask_head.class_agnostic:
        return mask_preds[:, 0]
    return mask_preds[torch.arange(mask_preds.shape[0], device=labels.device), labels]


def extract_rois(extractor, feats, boxes):
    """mmdet's ``SingleRoIExtractor`` on (K, 4) boxes of the one image: each box's level
    ``floor(log2(sqrt(w h) / finest_scale + 1e-6))`` clamped to the levels, then RoIAlign on that level
    (``torchvision.ops.roi_align``: mmcv's ``RoIAlign`` with ``pool_mode='avg'``; ONNX ``RoiAlign``)."""
    feats = feats[:extractor.num_inputs]
    rois = torch.cat([boxes.new_zeros(boxes.shape[0], 1), boxes], dim=1)
    layer = extractor.roi_layers[0]
    out = feats[0].new_zeros(boxes.shape[0], extractor.out_channels, *layer.output_size)
    levels = extractor.map_roi_levels(rois, len(feats))
    for level, (feat, layer) in enumerate(zip(feats, extractor.roi_layers, strict=True)):
        inds = (levels == level).nonzero().squeeze(1)
        out = out.index_put((inds,), torchvision.ops.roi_align(feat, rois[inds], layer.output_size,
                                                               layer.spatial_scale, layer.sampling_ratio,
                                                               layer.aligned))
    return out


def top_scores(scores, nms_pre):
    """The best ``min(nms_pre, n)`` of (n,) scores (all of them when ``nms_pre <= 0``), best first, and their
    indices."""
    k = scores.shape[0] if nms_pre <= 0 else torch.sym_min(nms_pre, scores.shape[0])
    return scores.topk(k)


def post_process(boxes, scores, labels, cfg):
    """mmdet's ``_bbox_post_process`` after the rescale: boxes of side ``<= min_bbox_size`` dropped (when it is
    set), class-aware NMS, the best ``max_per_img``."""
    if cfg['min_bbox_size'] >= 0:
        valid = ((boxes[:, 2:] - boxes[:, :2]) > cfg['min_bbox_size']).all(1)
        boxes, scores, labels = boxes[valid], scores[valid], labels[valid]
    keep = batched_nms(boxes, scores, labels, cfg['iou_threshold'])
    if cfg['max_per_img'] > 0:
        keep = keep[:cfg['max_per_img']]
    return boxes[keep], scores[keep], labels[keep]


def nms_settings(test_cfg):
    """The test settings the file applies, from a head's ``test_cfg``."""
    nms = test_cfg.get('nms') or {}
    if nms.get('type', 'nms') != 'nms' or nms.get('class_agnostic', False):
        raise ToolInputError(f'test_cfg nms {dict(nms)}: the file runs class-aware hard NMS (type nms) only')
    return dict(score_thr=float(test_cfg.get('score_thr', 0)), nms_pre=int(test_cfg.get('nms_pre', -1)),
                min_bbox_size=float(test_cfg.get('min_bbox_size', -1)), iou_threshold=float(nms['iou_threshold']),
                max_per_img=int(test_cfg.get('max_per_img', -1)))


def coder_settings(coder):
    if type(coder).__name__ != 'DeltaXYWHBBoxCoder' or coder.add_ctr_clamp or not coder.clip_border:
        raise ToolInputError(f'box coder {type(coder).__name__}: the file decodes DeltaXYWHBBoxCoder boxes '
                             '(clip_border, no add_ctr_clamp) only')
    return list(coder.means), list(coder.stds)


GRAPHS = {'RetinaNet': WholeRetinaNet, 'MaskRCNN': WholeMaskRCNN, 'CascadeRCNN': WholeCascadeMaskRCNN}


def check_detector(model):
    """ToolInputError unless the file reproduces this detector's inference."""
    name = type(model).__name__
    if name not in GRAPHS:
        raise ToolInputError(f'whole-model export takes mmdet\'s {", ".join(GRAPHS)} detectors; this config builds '
                             f'{name}')
    head = model.bbox_head if name == 'RetinaNet' else model.rpn_head
    if not head.use_sigmoid_cls:
        raise ToolInputError(f'{type(head).__name__} with softmax scores: the file takes sigmoid scores')
    if name != 'RetinaNet':
        roi = model.roi_head
        if not roi.with_mask:
            raise ToolInputError(f'{name} without a mask head: the file runs Mask R-CNN and Cascade Mask R-CNN')
        extractors, heads, masks = (stages(m) for m in (roi.bbox_roi_extractor, roi.bbox_head, roi.mask_head))
        for extractor in extractors + stages(roi.mask_roi_extractor):
            layer = extractor.roi_layers[0]
            if type(layer).__name__ != 'RoIAlign' or layer.pool_mode != 'avg':
                raise ToolInputError(f'RoI layer {type(layer).__name__} ({getattr(layer, "pool_mode", None)}): '
                                     'the file runs RoIAlign with pool_mode avg (ONNX RoiAlign)')
        if any(h.custom_cls_channels or h.custom_activation for h in heads) or \
                any(type(m).__name__ != 'FCNMaskHead' for m in masks):
            raise ToolInputError('the file runs softmax bbox heads and FCNMaskHead mask heads')


def stages(module):
    """The heads of each stage (a cascade's ModuleList, or the one head)."""
    return list(module) if isinstance(module, nn.ModuleList) else [module]


def prepare(model, cfg, checkpoint_meta=None):
    """``(module, meta)`` for a detector: the graph (:class:`WholeRetinaNet`, :class:`WholeMaskRCNN`) and its
    metadata."""
    check_detector(model)
    name = type(model).__name__
    module = GRAPHS[name](model).eval()
    pre = model.data_preprocessor
    if pre.pad_size_divisor != DIVISOR:
        raise ToolInputError(f'data preprocessor pad_size_divisor={pre.pad_size_divisor}: the file takes images '
                             f'padded to multiples of {DIVISOR} (mmdet\'s default)')
    masks = name != 'RetinaNet'
    if masks:
        roi = model.roi_head
        n = len(stages(roi.bbox_head))
        each = f' x {n} stages' if n > 1 else ''
        heads = ['RPN head', 'RPN proposals (top-k per level, decoding, NMS)', 'RoIAlign',
                 f'bbox head ({type(stages(roi.bbox_head)[-1]).__name__}{each})', 'box decoding and clipping',
                 'score threshold', 'class-aware NMS', 'max_per_img',
                 f'mask head ({type(stages(roi.mask_head)[-1]).__name__}{each}) on the detections',
                 'mask probabilities of each detection\'s class (28x28)', 'rescale to the original image']
        test_cfg = dict(module.rcnn_cfg, mask_thr_binary=module.mask_thr_binary, rpn=module.rpn_cfg)
    else:
        heads = [f'head ({type(model.bbox_head).__name__})', 'anchors', 'per-level score threshold and top-k',
                 'box decoding and clipping', 'rescale to the original image', 'class-aware NMS', 'max_per_img']
        test_cfg = module.cfg
    meta = dict(
        task='detection', model=name, config=cfg.filename.split('/')[-1],
        **dataset_meta(cfg, checkpoint_meta),
        input=dict(input_meta(pre), size_divisor=int(pre.pad_size_divisor)),
        resize=resize_meta(cfg),
        test_cfg=test_cfg,
        outputs=['boxes', 'scores', 'labels'] + (['masks'] if masks else []),
        input_names=['image', 'img_shape', 'scale_factor'],
        in_file=['BGR to RGB' if module.to_rgb else 'channels as read', 'normalisation', 'backbone', 'neck',
                 *heads],
        helper=['read the image (OpenCV, BGR)', 'the test resize (mmcv Resize, OpenCV bilinear)',
                'pad bottom/right to the size divisor with the mean'] +
               (['paste the masks into the image (bilinear, as mmdet\'s _do_paste_mask) and threshold at '
                 'mask_thr_binary'] if masks else []))
    return module, meta


def example_input(shape=(192, 320)):
    """The example the graph is traced at: an image padded to multiples of 32, its region and scale."""
    torch.manual_seed(0)
    return (torch.rand(1, 3, *shape) * 255, torch.tensor([shape[0] - 7, shape[1] - 26]),
            torch.tensor([1.25, 1.25]))


def dynamic_shapes(min_side, max_side):
    """H = 32 h and W = 32 w within [min_side, max_side] (the helper pads to the data preprocessor's
    ``pad_size_divisor``)."""
    lo, hi = max(1, -(-min_side // DIVISOR)), max_side // DIVISOR
    h = DIVISOR * torch.export.Dim('h', min=lo, max=hi)
    w = DIVISOR * torch.export.Dim('w', min=lo, max=hi)
    return ({2: h, 3: w}, None, None)


def reference(model, cfg, image):
    """mmdet's own inference (``inference_detector``: the config's test pipeline, ``test_step``, boxes rescaled
    to the image) on a BGR uint8 image: ``boxes`` (N, 4) float32, ``scores`` (N,), ``labels`` (N,) int64,
    ``masks`` (N, H, W) bool or None; and the boundaries of the detection set, ``score_thr`` and ``max_per_img``
    (of the final stage)."""
    from mmdet.apis import inference_detector

    model.cfg = cfg
    pred = inference_detector(model, image).pred_instances
    masks = pred.get('masks')
    test_cfg = model.bbox_head.test_cfg if hasattr(model, 'bbox_head') else model.roi_head.test_cfg
    return dict(boxes=pred.bboxes.cpu().numpy().astype(np.float32), scores=pred.scores.cpu().numpy(),
                labels=pred.labels.cpu().numpy().astype(np.int64),
                masks=None if masks is None else masks.cpu().numpy().astype(bool),
                score_thr=float(test_cfg.get('score_thr', 0)), max_per_img=int(test_cfg.get('max_per_img', -1)))


def box_iou(a, b):
    """(len(a), len(b)) IoU of xyxy boxes."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(-1)
    area_a, area_b = ((x[:, 2:] - x[:, :2]).clip(0).prod(-1) for x in (a, b))
    return inter / np.maximum(area_a[:, None] + area_b[None] - inter, 1e-12)


def match(result, ref, min_iou):
    """Pairs (i in ref, j in result): each reference detection, best first, to the unmatched result detection of
    its label with the highest box IoU, when that IoU is at least ``min_iou``."""
    iou = box_iou(ref['boxes'], result['boxes'])
    iou[ref['labels'][:, None] != result['labels'][None]] = -1
    pairs, taken = [], np.zeros(len(result['boxes']), bool)
    for i in range(len(ref['boxes'])):
        row = np.where(taken, -1, iou[i])
        j = int(row.argmax()) if len(row) else -1
        if j >= 0 and row[j] >= min_iou:
            pairs.append((i, j))
            taken[j] = True
    return pairs, iou


def at_boundary(score, ref, score_tol):
    """Whether a detection of ``score`` can be in one run's set and not the other's by rounding alone: its score
    is within ``score_tol`` of ``score_thr``, or of the lowest kept score when ``max_per_img`` cut the set."""
    cut = len(ref['scores']) == ref['max_per_img'] > 0 and abs(score - ref['scores'].min()) <= score_tol
    return cut or abs(score - ref['score_thr']) <= score_tol


def compare(result, ref, min_iou=0.99, score_tol=1e-4, min_mask_iou=0.98, mask_pixels=4):
    """``(ok, summary)``: the same detections. Each of mmdet's detections is matched (:func:`match`) to one of the
    file's with the same label and box IoU ``>= min_iou``, scores within ``score_tol``, masks with IoU ``>=
    min_mask_iou`` or at most ``mask_pixels`` pixels different; a detection left unmatched on either side is allowed
    only at the boundary of the set (:func:`at_boundary`), at most one per side.

    Tolerances: fp32 in two runtimes (different convolution and matrix kernels, summation orders) gives scores
    within ~5e-6 and box corners within ~1e-2 px, and mask pixels differ only where the pasted probability is
    within rounding (~1e-6) of ``mask_thr_binary`` (a few pixels per image, which on a small mask can be more than
    2 %); a wrong graph (channel order, normalisation, anchors, NMS) changes scores by 1e-2 and more and boxes by
    pixels."""
    pairs, iou = match(result, ref, min_iou)
    ri = np.array([i for i, _ in pairs], np.int64)
    rj = np.array([j for _, j in pairs], np.int64)
    lost = sorted(set(range(len(ref['scores']))) - set(ri.tolist()))
    extra = sorted(set(range(len(result['scores']))) - set(rj.tolist()))
    box_ious = iou[ri, rj] if pairs else np.ones(0)
    score_err = np.abs(result['scores'][rj] - ref['scores'][ri]) if pairs else np.zeros(0)
    ok = bool((score_err <= score_tol).all())
    summary = (f'{len(pairs)}/{len(ref["scores"])} detections matched (file: {len(result["scores"])}), box IoU '
               f'>= {box_ious.min() if pairs else 1:.5f}, max score difference {score_err.max() if pairs else 0:.1e}')
    if ref.get('masks') is not None and pairs:
        a, b = ref['masks'][ri], result['masks'][rj]
        union = (a | b).sum((1, 2))
        differ = (a != b).sum((1, 2))
        mask_iou = np.where(union > 0, (a & b).sum((1, 2)) / np.maximum(union, 1), 1.0)
        summary += f', mask IoU >= {mask_iou.min():.4f} ({int(differ.sum())} pixels differ)'
        ok = ok and bool(((mask_iou >= min_mask_iou) | (differ <= mask_pixels)).all())
    for side, idx, dets in (('mmdet only', lost, ref), ('file only', extra, result)):
        if idx:
            summary += f', {side}: ' + ', '.join(f'{dets["scores"][k]:.5f}' for k in idx)
            ok = ok and len(idx) <= 1 and all(at_boundary(dets['scores'][k], ref, score_tol) for k in idx)
    return ok, summary
