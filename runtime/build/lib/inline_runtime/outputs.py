"""The outputs of ``tools/infer.py``, written from an exported model's predictions (numpy and OpenCV only).

Segmentation: ``vis/<name>``, the image blended with the class colours, ``image (1 - a) + colour a`` (a = 0.6, as
``tools/infer.py`` asks mmseg's visualiser), each class named at its pixel farthest from the class's border; and
``pred/<stem>.png``, the label map (8-bit when every label fits, else 16-bit). Detection: ``vis/<name>``, boxes
(and masks) above the score threshold drawn on the image; and ``preds/<stem>.json`` with every prediction as mmdet's
``DetInferencer`` writes it (``labels``, ``scores``, ``bboxes`` as x1, y1, x2, y2 in the image's pixels, and
``masks`` as COCO run-length encodings with ``counts`` as a string, :func:`rle_encode`).
"""
import json
import os
import os.path as osp

import cv2
import numpy as np

ALPHA = 0.6


def colours(palette, n):
    """``n`` RGB colours: the palette's, else a fixed pseudo-random set (seeded: the same for every run)."""
    if palette and len(palette) >= n:
        return np.asarray(palette[:n], np.uint8)
    return np.random.default_rng(42).integers(0, 256, (n, 3), dtype=np.uint8)


def draw_segmentation(image, labels, classes, palette):
    """BGR image with the label map blended over it and the classes named."""
    n = max(len(classes), int(labels.max(initial=0)) + 1)
    rgb = colours(palette, n)[labels]
    out = (image * (1 - ALPHA) + rgb[..., ::-1] * ALPHA).astype(np.uint8)
    scale = max(min(image.shape[:2]) / 500, 0.3)
    for label in np.unique(labels):
        inside = (labels == label).astype(np.uint8)
        y, x = np.unravel_index(cv2.distanceTransform(inside, cv2.DIST_L2, 5).argmax(), inside.shape)
        name = classes[label] if label < len(classes) else str(label)
        cv2.putText(out, name, (int(x), int(y)), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1, cv2.LINE_AA)
    return out


def draw_detections(image, result, classes, palette, score_thr):
    """BGR image with the boxes (and masks) whose score is at least ``score_thr``."""
    out = image.copy()
    keep = result['scores'] >= score_thr
    labels = result['labels'][keep]
    colour = colours(palette, max(len(classes), int(labels.max(initial=0)) + 1))
    masks = result.get('masks')
    if masks is not None:
        for mask, label in zip(masks[keep], labels, strict=True):
            out[mask] = (out[mask] * (1 - ALPHA) + colour[label][::-1] * ALPHA).astype(np.uint8)
    for box, score, label in zip(result['boxes'][keep], result['scores'][keep], labels, strict=True):
        c = tuple(int(v) for v in colour[label][::-1])
        x1, y1, x2, y2 = (int(round(float(v))) for v in box)
        cv2.rectangle(out, (x1, y1), (x2, y2), c, 2)
        name = classes[label] if label < len(classes) else str(label)
        cv2.putText(out, f'{name}: {score:.2f}', (x1, max(y1 - 4, 10)), cv2.FONT_HERSHEY_SIMPLEX, 0.45, c, 1,
                    cv2.LINE_AA)
    return out


def rle_encode(mask):
    """COCO's compressed run-length encoding of a (H, W) boolean mask, as pycocotools' ``encode``: run lengths in
    column-major order starting with a run of zeros, each (after the first two, minus the one two before) written
    in 5-bit groups, low first, with a continuation bit, as characters from 48."""
    flat = np.asarray(mask, bool).flatten(order='F')
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    runs = np.diff(np.concatenate([[0], changes, [flat.size]])).tolist()
    if flat.size and flat[0]:
        runs = [0] + runs
    chars = []
    for i, run in enumerate(runs):
        x = run - runs[i - 2] if i > 2 else run
        more = True
        while more:
            c = x & 0x1f
            x >>= 5
            more = (x != -1) if c & 0x10 else (x != 0)
            if more:
                c |= 0x20
            chars.append(chr(c + 48))
    return {'size': [int(mask.shape[0]), int(mask.shape[1])], 'counts': ''.join(chars)}


def detection_json(result):
    """A detection result as ``DetInferencer``'s ``preds/<stem>.json``."""
    out = {'labels': result['labels'].tolist(), 'scores': result['scores'].tolist(),
           'bboxes': result['boxes'].tolist()}
    if result.get('masks') is not None:
        out['masks'] = [rle_encode(m) for m in result['masks']]
    return out


def write_label_map(path, labels):
    """A (H, W) label map as a PNG: 8-bit when every label fits, else 16-bit."""
    dtype = np.uint8 if int(labels.max(initial=0)) < 256 else np.uint16
    if not cv2.imwrite(path, labels.astype(dtype)):
        raise OSError(f'cannot write {path}')


def write_outputs(out_dir, image_path, image, result, meta, score_thr=0.3):
    """Write one image's outputs under ``out_dir``; their paths."""
    name = osp.basename(image_path)
    stem = osp.splitext(name)[0]
    classes, palette = meta.get('classes') or [], meta.get('palette') or []
    vis = osp.join(out_dir, 'vis', name)
    os.makedirs(osp.dirname(vis), exist_ok=True)
    if meta['task'] == 'segmentation':
        drawn = draw_segmentation(image, result['labels'], classes, palette)
        pred = osp.join(out_dir, 'pred', f'{stem}.png')
        os.makedirs(osp.dirname(pred), exist_ok=True)
        write_label_map(pred, result['labels'])
    else:
        drawn = draw_detections(image, result, classes, palette, score_thr)
        pred = osp.join(out_dir, 'preds', f'{stem}.json')
        os.makedirs(osp.dirname(pred), exist_ok=True)
        with open(pred, 'w') as f:
            json.dump(detection_json(result), f)
    if not cv2.imwrite(vis, drawn):
        raise OSError(f'cannot write {vis}')
    return vis, pred
