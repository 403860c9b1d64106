"""The generated shapes dataset: deterministic for a seed, and its two annotation styles agree; the same generator at
other sizes and classes (the training benchmark's data)."""
import filecmp
import json
import os

import cv2
import numpy as np
import pytest

from inline_backbones.data.shapes import CLASSES, generate_shapes_dataset, write_images

# pycocotools (a dependency of the OpenMMLab set-up, absent without it) reads the files back.
COCO = pytest.importorskip('pycocotools.coco').COCO


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_same_seed_same_bytes_other_seed_other_data(tmp_path):
    counts = generate_shapes_dataset(str(tmp_path / 'a'), num_train=3, num_val=2, seed=7)
    assert counts['train']['images'] == 3 and counts['val']['images'] == 2
    generate_shapes_dataset(str(tmp_path / 'b'), num_train=3, num_val=2, seed=7)
    generate_shapes_dataset(str(tmp_path / 'c'), num_train=3, num_val=2, seed=8)
    files = _files(tmp_path / 'a')
    assert len(files) == 2 + 2 * 5 and files == _files(tmp_path / 'b') == _files(tmp_path / 'c')
    assert all(filecmp.cmp(tmp_path / 'a' / f, tmp_path / 'b' / f, shallow=False) for f in files)
    assert not any(filecmp.cmp(tmp_path / 'a' / f, tmp_path / 'c' / f, shallow=False)
                   for f in files if f.endswith('.png'))
    # train and val are different draws too
    assert not filecmp.cmp(tmp_path / 'a/labels/train/00001.png', tmp_path / 'a/labels/val/00001.png', shallow=False)


def test_coco_masks_agree_with_the_label_maps(tmp_path):
    """Per class, the union of the decoded COCO polygons covers the same pixels as the PNG label map
    (up to the one-pixel outline of polygon rasterisation); boxes and areas hold the masks."""
    root = tmp_path / 'shapes'
    counts = generate_shapes_dataset(str(root), num_train=6, num_val=0, seed=3)
    coco = COCO(str(root / 'annotations' / 'instances_train.json'))
    assert [c['name'] for c in coco.loadCats(coco.getCatIds())] == list(CLASSES)
    assert len(coco.getAnnIds()) == counts['train']['instances'] >= 12
    kernel = np.ones((3, 3), np.uint8)
    for image in coco.loadImgs(coco.getImgIds()):
        label_map = cv2.imread(str(root / 'labels' / 'train' / image['file_name'].replace('.jpg', '.png')),
                               cv2.IMREAD_UNCHANGED)
        assert label_map.shape == (image['height'], image['width']) == (256, 256)
        assert cv2.imread(str(root / 'images' / 'train' / image['file_name'])).shape == (256, 256, 3)
        anns = coco.loadAnns(coco.getAnnIds(imgIds=image['id']))
        assert set(np.unique(label_map)) - {0} == {a['category_id'] for a in anns}
        for category in range(1, len(CLASSES) + 1):
            union = np.zeros_like(label_map)
            for ann in anns:
                if ann['category_id'] == category:
                    mask = coco.annToMask(ann)
                    union |= mask
                    x, y, w, h = ann['bbox']
                    ys, xs = np.nonzero(mask)
                    assert x - 1 <= xs.min() and xs.max() + 1 <= x + w + 1      # the box holds the mask
                    assert y - 1 <= ys.min() and ys.max() + 1 <= y + h + 1
                    assert 0.7 * ann['area'] <= mask.sum() <= 1.3 * ann['area']
            in_map = (label_map == category).astype(np.uint8)
            assert not (union & ~cv2.dilate(in_map, kernel).astype(bool)).any()
            # the other way, thin slivers left by occlusion can fall between polygon vertices
            assert (in_map & ~cv2.dilate(union, kernel).astype(bool)).sum() <= 0.01 * max(in_map.sum(), 1)
            if in_map.sum() >= 1000:       # small objects are mostly outline
                assert (union & in_map).sum() / (union | in_map).sum() > 0.85
    with open(root / 'annotations' / 'instances_train.json') as f:
        ids = [a['id'] for a in json.load(f)['annotations']]
    assert ids == list(range(1, len(ids) + 1))


def test_other_sizes_and_classes_in_another_layout(tmp_path):
    """Images cycle through ``sizes`` and their objects scale with the shorter side; labels run over all the classes
    (COCO categories named after them, label maps 0 for the background and 1..C); the files follow the names and
    suffixes given."""
    classes = tuple(f'class{i}' for i in range(150))
    written = write_images(np.random.default_rng(0), [f'img{i}' for i in range(6)], str(tmp_path / 'images'),
                           image_suffix='.png', label_dir=str(tmp_path / 'maps'), label_suffix='_seg.png',
                           ann_file=str(tmp_path / 'ann' / 'train.json'), sizes=[(512, 683), (40, 32)],
                           classes=classes)
    assert written['images'] == 6 and written['sizes'] == [(40, 32), (512, 683)]
    coco = COCO(str(tmp_path / 'ann' / 'train.json'))
    assert [c['name'] for c in coco.loadCats(coco.getCatIds())] == list(classes)
    assert len(coco.getAnnIds()) == written['instances'] >= 6
    values, largest = set(), {}
    for image in coco.loadImgs(coco.getImgIds()):
        stem = image['file_name'][:-len('.png')]
        size = (image['height'], image['width'])
        assert size == ((512, 683) if image['id'] % 2 else (40, 32)) == cv2.imread(
            str(tmp_path / 'images' / image['file_name'])).shape[:2]
        label_map = cv2.imread(str(tmp_path / 'maps' / f'{stem}_seg.png'), cv2.IMREAD_UNCHANGED)
        assert label_map.shape == size
        anns = coco.loadAnns(coco.getAnnIds(imgIds=image['id']))
        assert set(np.unique(label_map)) - {0} == {a['category_id'] for a in anns}
        values |= set(np.unique(label_map).tolist())
        scale = min(size) / 256
        for ann in anns:                 # radii of 18-60 pixels at 256, scaled; visible parts of 64 pixels or more
            assert 64 * scale ** 2 <= ann['area'] <= 4 * (60 * scale + 1) ** 2
            largest[size] = max(largest.get(size, 0), ann['area'])
    assert largest[512, 683] > 4 * 60 ** 2 and largest[40, 32] < 60 ** 2
    assert 0 in values and max(values) > len(CLASSES) and max(values) <= len(classes)


def test_label_maps_of_more_classes_than_a_byte_holds_are_refused(tmp_path):
    with pytest.raises(ValueError, match='255'):
        write_images(np.random.default_rng(0), ['a'], str(tmp_path), label_dir=str(tmp_path),
                     classes=tuple(range(255)))
