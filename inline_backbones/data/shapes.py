"""A deterministic, generated instance- and semantic-segmentation dataset ("shapes").

Each 256x256 image shows 2-5 objects of four classes on a textured, low-saturation background. Every
class has its own colour family and its own kind of shape, and shapes vary within a class (size, aspect
ratio, rotation, exact hue, partial occlusion), so the task is learnable in minutes on a CPU while an
untrained model scores near zero. One generator writes both annotation styles for the same images:

    ROOT/images/{train,val}/NNNNN.jpg
    ROOT/annotations/instances_{train,val}.json      COCO instances, polygon masks of the visible parts
    ROOT/labels/{train,val}/NNNNN.png                label maps: 0 background, 1..4 the classes
"""
import json
import os
import os.path as osp

import cv2
import numpy as np

CLASSES = ('disc', 'box', 'triangle', 'hexagon')
# Colour family per class: hue centre on OpenCV's 0-179 scale (red, green, blue, yellow).
_HUES = (0, 60, 115, 28)
PALETTE = ((220, 60, 60), (60, 200, 60), (60, 90, 230), (230, 200, 40))  # RGB, for visualisation
IMAGE_SIZE = 256


def _background(rng, size):
    """Grey-ish smooth noise plus fine grain and a few faint strokes (texture without colour cues)."""
    coarse = cv2.resize(rng.normal(size=(size // 16, size // 16)), (size, size), interpolation=cv2.INTER_CUBIC)
    base = 110 + 35 * coarse + rng.normal(scale=12, size=(size, size))
    img = np.repeat(base[..., None], 3, axis=2) + rng.normal(scale=6, size=(1, 1, 3))
    for _ in range(int(rng.integers(2, 6))):
        p1, p2 = rng.integers(0, size, 2), rng.integers(0, size, 2)
        cv2.line(img, tuple(int(v) for v in p1), tuple(int(v) for v in p2), (float(rng.uniform(60, 200)),) * 3,
                 int(rng.integers(1, 4)))
    return np.clip(img, 0, 255).astype(np.uint8)


def _shape_polygon(label, rng, center, radius):
    """Outline (K x 2 int32) of an object of class ``label`` around ``center``."""
    angle = rng.uniform(0, 2 * np.pi)
    if label == 0:      # discs and ellipses
        t = np.linspace(0, 2 * np.pi, 48, endpoint=False)
        pts = np.stack([np.cos(t), rng.uniform(0.6, 1.0) * np.sin(t)], 1)
    elif label == 1:    # squares and rectangles
        a = rng.uniform(0.5, 1.0)
        pts = np.array([[-1, -a], [1, -a], [1, a], [-1, a]], dtype=float)
    elif label == 2:    # triangles of varied shape
        t = np.array([0, 2 * np.pi / 3, 4 * np.pi / 3]) + rng.uniform(-0.35, 0.35, 3)
        pts = np.stack([np.cos(t), np.sin(t)], 1)
    else:               # hexagons, somewhat irregular
        t = np.arange(6) * np.pi / 3
        pts = np.stack([np.cos(t), np.sin(t)], 1) * rng.uniform(0.85, 1.0, (6, 1))
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return np.round(pts @ rot.T * radius + center).astype(np.int32)


def _colour(label, rng):
    hsv = np.uint8([[[(_HUES[label] + rng.integers(-7, 8)) % 180, rng.integers(150, 256), rng.integers(150, 256)]]])
    return tuple(int(c) for c in cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0])


def render_image(rng, size=IMAGE_SIZE):
    """One image (BGR uint8), its instances [(label, visible mask)] and its label map."""
    img = _background(rng, size)
    masks, labels = [], []
    for _ in range(int(rng.integers(2, 6))):
        label = int(rng.integers(0, len(CLASSES)))
        radius = rng.uniform(18, 60)
        center = rng.uniform(radius * 0.6, size - radius * 0.6, 2)
        mask = np.zeros((size, size), np.uint8)
        cv2.fillPoly(mask, [_shape_polygon(label, rng, center, radius)], 1)
        shade = np.clip(1 + 0.15 * rng.normal(size=(size, size, 1)), 0.7, 1.3)
        coloured = np.clip(np.array(_colour(label, rng), float) * shade, 0, 255).astype(np.uint8)
        img[mask > 0] = coloured[mask > 0]
        for m in masks:             # later objects occlude earlier ones
            m[mask > 0] = 0
        masks.append(mask)
        labels.append(label)
    label_map = np.zeros((size, size), np.uint8)
    instances = []
    for label, mask in zip(labels, masks, strict=True):
        if mask.sum() >= 64:
            instances.append((label, mask))
            label_map[mask > 0] = label + 1
    return img, instances, label_map


def _coco_annotation(mask, label, ann_id, image_id):
    contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    polygons = [c.reshape(-1).astype(float).tolist() for c in contours if len(c) >= 3]
    if not polygons:
        return None
    x, y, w, h = cv2.boundingRect(mask)
    return dict(id=ann_id, image_id=image_id, category_id=label + 1, segmentation=polygons,
                area=float(mask.sum()), bbox=[float(x), float(y), float(w), float(h)], iscrowd=0)


def generate_shapes_dataset(root, num_train=400, num_val=100, seed=0, progress=None):
    """Write the dataset under ``root`` (deterministic for a given seed); returns the split sizes.
    ``progress(message)``, if given, hears of every hundredth image written."""
    categories = [dict(id=i + 1, name=name) for i, name in enumerate(CLASSES)]
    counts = {}
    for split_index, (split, count) in enumerate((('train', num_train), ('val', num_val))):
        rng = np.random.default_rng([seed, split_index])
        for sub in ('images', 'labels'):
            os.makedirs(osp.join(root, sub, split), exist_ok=True)
        os.makedirs(osp.join(root, 'annotations'), exist_ok=True)
        images, annotations = [], []
        for image_id in range(1, count + 1):
            img, instances, label_map = render_image(rng)
            name = f'{image_id:05d}'
            cv2.imwrite(osp.join(root, 'images', split, name + '.jpg'), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
            cv2.imwrite(osp.join(root, 'labels', split, name + '.png'), label_map)
            images.append(dict(id=image_id, file_name=name + '.jpg', height=img.shape[0], width=img.shape[1]))
            for label, mask in instances:
                ann = _coco_annotation(mask, label, len(annotations) + 1, image_id)
                if ann is not None:
                    annotations.append(ann)
            if progress is not None and image_id % 100 == 0:
                progress(f'{split}: {image_id}/{count} images')
        with open(osp.join(root, 'annotations', f'instances_{split}.json'), 'w') as f:
            json.dump(dict(images=images, annotations=annotations, categories=categories), f)
        counts[split] = dict(images=len(images), instances=len(annotations))
    return counts
