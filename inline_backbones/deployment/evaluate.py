"""Accuracy of an exported file on a labelled dataset, as mmseg's and mmdet's metrics compute it, for comparing
precisions (fp32, bf16, int8) and runtimes on the same images.

* Segmentation (mmseg's ``IoUMetric``): over all images, per class ``IoU = |pred = c and gt = c| / |pred = c or
  gt = c|`` counted on pixels whose label is not ``ignore_index``; ``mIoU`` is the mean over classes with a
  non-empty union; ``aAcc`` the fraction of counted pixels predicted right. Labels are the PNGs of ``labels`` with
  each image's stem.
* Detection (mmdet's ``CocoMetric``, pycocotools' ``COCOeval``): box and mask AP at IoU 0.50:0.95 over a COCO
  annotation file; the model's label ``i`` is the category whose name is the file's class ``i``.
"""
import os.path as osp

import numpy as np

from inline_runtime.images import read_image


def segmentation_iou(predictor, images, labels, ignore_index=255):
    """``{'mIoU', 'aAcc', 'IoU'}`` (fractions) of ``predictor`` on ``images`` (paths) against ``labels`` (a folder)."""
    import cv2

    n = len(predictor.meta['classes'])
    intersect, union, right, counted = np.zeros(n), np.zeros(n), 0, 0
    for path in images:
        gt = cv2.imread(osp.join(labels, osp.splitext(osp.basename(path))[0] + '.png'), cv2.IMREAD_UNCHANGED)
        if gt is None:
            raise FileNotFoundError(f'no label map for {path} in {labels}')
        pred = predictor.predict(read_image(path))['labels']
        valid = gt != ignore_index
        p, g = pred[valid], gt[valid].astype(np.int64)
        intersect += np.bincount(p[p == g], minlength=n)[:n]
        union += np.bincount(p, minlength=n)[:n] + np.bincount(g, minlength=n)[:n]
        right += int((p == g).sum())
        counted += int(valid.sum())
    union -= intersect
    with np.errstate(invalid='ignore', divide='ignore'):
        iou = intersect / union
    return {'mIoU': float(np.nanmean(iou)), 'aAcc': right / counted, 'IoU': iou.tolist()}


def detection_ap(predictor, coco_json, image_dir):
    """``{'bbox_mAP', 'segm_mAP' (masks only)}`` of ``predictor`` on a COCO annotation file's images."""
    from pycocotools import mask as coco_mask
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    coco = COCO(coco_json)
    names = {c['name']: c['id'] for c in coco.loadCats(coco.getCatIds())}
    cat_ids = [names[c] for c in predictor.meta['classes']]
    results = {'bbox': [], 'segm': []}
    for image_id in coco.getImgIds():
        info = coco.loadImgs(image_id)[0]
        out = predictor.predict(read_image(osp.join(image_dir, info['file_name'])))
        for i, (box, score, label) in enumerate(zip(out['boxes'], out['scores'], out['labels'], strict=True)):
            x1, y1, x2, y2 = (float(v) for v in box)
            entry = dict(image_id=image_id, category_id=cat_ids[int(label)], score=float(score))
            results['bbox'].append(dict(entry, bbox=[x1, y1, x2 - x1, y2 - y1]))
            if out.get('masks') is not None:
                rle = coco_mask.encode(np.asfortranarray(out['masks'][i].astype(np.uint8)))
                rle['counts'] = rle['counts'].decode()
                results['segm'].append(dict(entry, segmentation=rle))
    metrics = {}
    for kind, dets in results.items():
        if not dets:
            continue
        evaluation = COCOeval(coco, coco.loadRes(dets), kind)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
        metrics[f'{kind}_mAP'] = float(evaluation.stats[0])
    return metrics
