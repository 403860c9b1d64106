"""A deterministic, generated instance- and semantic-segmentation dataset ("shapes").

Each 256x256 image shows 2-5 objects of four classes on a textured, low-saturation background. Every
class has its own colour family and its own kind of shape, and shapes vary within a class (size, aspect
ratio, rotation, exact hue, partial occlusion), so the task is learnable in minutes on a CPU while an
untrained model scores near zero. One generator writes both annotation styles for the same images:

    ROOT/images/{train,val}/NNNNN.jpg
    ROOT/annotations/instances_{train,val}.json      COCO instances, polygon masks of the visible parts
    ROOT/labels/{train,val}/NNNNN.png                label maps: 0 background, 1..4 the classes

The same generator (:func:`write_images`) writes the training benchmark's data
(:mod:`inline_backbones.benchmark.training_data`) in a dataset config's own layout: images of other sizes
(objects scaled with the shorter side) and other classes (class k drawn as class k mod 4, so that only four
classes can be told apart by their looks).
"""
import json
import os
import os.path as osp
from functools import partial

import cv2
import numpy as np

CLASSES = ('disc', 'box', 'triangle', 'hexagon')
# Colour family per class: hue centre on OpenCV's 0-179 scale (red, green, blue, yellow).
_HUES = (0, 60, 115, 28)
PALETTE = ((220, 60, 60), (60, 200, 60), (60, 90, 230), (230, 200, 40))  # RGB, for visualisation
IMAGE_SIZE = 256


def _background(rng, height, width):
    """Grey-ish smooth noise plus fine grain and a few faint strokes (texture without colour cues)."""
    coarse = cv2.resize(rng.normal(size=(max(1, height // 16), max(1, width // 16))), (width, height),
                        interpolation=cv2.INTER_CUBIC)
    base = 110 + 35 * coarse + rng.normal(scale=12, size=(height, width))
    img = np.repeat(base[..., None], 3, axis=2) + rng.normal(scale=6, size=(1, 1, 3))
    for _ in range(int(rng.integers(2, 6))):
        p1, p2 = rng.integers(0, (width, height)), rng.integers(0, (width, height))
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


def render_image(rng, size=IMAGE_SIZE, num_classes=None, object_scale=1.0):
    """One image (BGR uint8) of ``size`` (an int: square, or ``(height, width)``), its instances [(label, visible
    mask)] and its label map (0 background, ``label + 1`` an object). Labels are 0..num_classes - 1 (default: the
    four of :data:`CLASSES`), label k drawn as class ``k % 4``. Objects' radii are 18-60 pixels times
    ``object_scale``, and an instance whose visible part is under 64 pixels times its square is left out (its pixels
    stay background in the map)."""
    height, width = (size, size) if isinstance(size, int) else size
    num_classes = len(CLASSES) if num_classes is None else num_classes
    img = _background(rng, height, width)
    masks, labels = [], []
    for _ in range(int(rng.integers(2, 6))):
        label = int(rng.integers(0, num_classes))
        radius = rng.uniform(18, 60) * object_scale
        center = rng.uniform(radius * 0.6, (width - radius * 0.6, height - radius * 0.6))    # (x, y)
        mask = np.zeros((height, width), np.uint8)
        cv2.fillPoly(mask, [_shape_polygon(label % len(CLASSES), rng, center, radius)], 1)
        shade = np.clip(1 + 0.15 * rng.normal(size=(height, width, 1)), 0.7, 1.3)
        coloured = np.clip(np.array(_colour(label % len(CLASSES), rng), float) * shade, 0, 255).astype(np.uint8)
        img[mask > 0] = coloured[mask > 0]
        for m in masks:             # later objects occlude earlier ones
            m[mask > 0] = 0
        masks.append(mask)
        labels.append(label)
    label_map = np.zeros((height, width), np.uint8)
    instances = []
    for label, mask in zip(labels, masks, strict=True):
        if mask.sum() >= 64 * object_scale ** 2:
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


def write_images(rng, stems, image_dir, *, image_suffix='.jpg', label_dir=None, label_suffix='.png', ann_file=None,
                 sizes=((IMAGE_SIZE, IMAGE_SIZE),), classes=CLASSES, progress=None):
    """Render one image per name of ``stems`` and write it as ``image_dir/STEM + image_suffix``, its label map as
    ``label_dir/STEM + label_suffix`` where ``label_dir`` is given, and the COCO instances of them all (image ids from
    1, the categories ``classes`` with ids from 1) to ``ann_file`` where given. Image i is of ``sizes[i % len(sizes)]``
    (height, width), its objects scaled with its shorter side (``object_scale`` 1 at 256 pixels); its labels are the
    indices of ``classes`` (up to 254 of them). ``progress(message)``, if given, hears of every hundredth image.
    Returns the numbers of images and of instances (COCO annotations), and the sizes."""
    if label_dir is not None and len(classes) > 254:
        raise ValueError(f'{len(classes)} classes do not fit label maps of 8 bits (0: background, 255: ignored)')
    os.makedirs(image_dir, exist_ok=True)
    if label_dir is not None:
        os.makedirs(label_dir, exist_ok=True)
    images, annotations = [], []
    for image_id, stem in enumerate(stems, 1):
        height, width = sizes[(image_id - 1) % len(sizes)]
        img, instances, label_map = render_image(rng, (height, width), len(classes), min(height, width) / IMAGE_SIZE)
        cv2.imwrite(osp.join(image_dir, stem + image_suffix), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
        if label_dir is not None:
            cv2.imwrite(osp.join(label_dir, stem + label_suffix), label_map)
        images.append(dict(id=image_id, file_name=stem + image_suffix, height=img.shape[0], width=img.shape[1]))
        for label, mask in instances:
            ann = _coco_annotation(mask, label, len(annotations) + 1, image_id)
            if ann is not None:
                annotations.append(ann)
        if progress is not None and image_id % 100 == 0:
            progress(f'{image_id}/{len(stems)} images')
    if ann_file is not None:
        os.makedirs(osp.dirname(ann_file) or '.', exist_ok=True)
        with open(ann_file, 'w') as f:
            json.dump(dict(images=images, annotations=annotations,
                           categories=[dict(id=i + 1, name=name) for i, name in enumerate(classes)]), f)
    return dict(images=len(images), instances=len(annotations),
                sizes=sorted({(im['height'], im['width']) for im in images}))


def generate_shapes_dataset(root, num_train=400, num_val=100, seed=0, progress=None):
    """Write the dataset under ``root`` (deterministic for a given seed); returns the split sizes.
    ``progress(message)``, if given, hears of every hundredth image written."""
    counts = {}
    for split_index, (split, count) in enumerate((('train', num_train), ('val', num_val))):
        written = write_images(np.random.default_rng([seed, split_index]), [f'{i:05d}' for i in range(1, count + 1)],
                               osp.join(root, 'images', split), label_dir=osp.join(root, 'labels', split),
                               ann_file=osp.join(root, 'annotations', f'instances_{split}.json'),
                               progress=None if progress is None else partial(_in_split, progress, split))
        counts[split] = dict(images=written['images'], instances=written['instances'])
    return counts


def _in_split(progress, split, message):
    """A progress message of ``split``."""
    progress(f'{split}: {message}')
