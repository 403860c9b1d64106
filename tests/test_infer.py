"""tools/infer.py as users run it (small models, random weights): native scale for every kind of detector, outputs
named after their inputs, folders with other files, small and thin images, and one-line errors before the model is
built."""
import json
import os
import os.path as osp
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from tool_modules import load_tool

from inline_backbones.data.shapes import CLASSES, PALETTE, render_image
from inline_backbones.models.backbone import Backbone
from inline_backbones.openmmlab.task_tools import build_task_model as build

infer = load_tool('tools/infer.py')

pytestmark = pytest.mark.slow

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DET_CONFIG = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-mini_fpn_shapes.py')
SEG_CONFIG = osp.join(ROOT, 'mmseg_configs', 'inline-swin-mini_upernet_shapes-256x256.py')
TINY_SWIN = ("arch=dict(_delete_=True, embed_dims=32, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8]), attn_type='IIIS', "
             'init_cfg=None')
# The COCO recipes with a tiny backbone, every detection kept (random weights score low).
DET_CHILDREN = {
    'mask-rcnn': None,
    'cascade-mask-rcnn': ('cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py',
                          f'model = dict(backbone=dict({TINY_SWIN}), neck=dict(in_channels=[32, 64, 128, 256]), '
                          'test_cfg=dict(rcnn=dict(score_thr=0.0)))'),
    'retinanet': ('retinanet_inline-pvt-t_fpn_1x_coco.py',
                  'model = dict(backbone=dict(init_cfg=None), test_cfg=dict(score_thr=0.0))'),
}


def _config(tmp_path, kind):
    if DET_CHILDREN[kind] is None:
        return DET_CONFIG
    base, body = DET_CHILDREN[kind]
    path = tmp_path / f'{kind}.py'
    path.write_text(f"_base_ = '{osp.join(ROOT, 'mmdet_configs', base)}'\n{body}\n")
    return str(path)


def _checkpoint(config, path, classes, palette):
    """A Runner-style checkpoint of the config's model (random weights) with the dataset's class names."""
    _, model, _ = build(config)
    torch.save({'state_dict': model.state_dict(),
                'meta': {'dataset_meta': {'classes': classes, 'palette': [list(c) for c in palette]}}}, path)
    return str(path)


def _image(path, shape):
    """A shapes picture resized to ``shape`` (H, W)."""
    img = render_image(np.random.default_rng(0))[0]
    assert cv2.imwrite(str(path), cv2.resize(img, shape[::-1], interpolation=cv2.INTER_AREA))
    return str(path)


def _run(monkeypatch, *argv):
    monkeypatch.setattr(sys, 'argv', ['infer.py', *map(str, argv)])
    infer.main()


@pytest.fixture
def backbone_inputs(monkeypatch):
    """The (H, W) of every batch the backbone sees."""
    seen = []
    forward = Backbone.forward

    def recording(self, x, image_shapes=None):
        seen.append(tuple(x.shape[-2:]))
        return forward(self, x, image_shapes)

    monkeypatch.setattr(Backbone, 'forward', recording)
    return seen


@pytest.mark.parametrize('kind', list(DET_CHILDREN))
def test_native_scale_detects_at_the_images_own_size(kind, tmp_path, monkeypatch, capsys, backbone_inputs):
    """--scale native on a two-stage detector with masks, a cascade and a one-stage detector: the backbone sees the
    image at its own size (padded to the detector's divisor 32 only), and the predictions come back in the image's
    coordinates (the resize step became a scale factor of 1, which the heads read)."""
    if kind == 'mask-rcnn':
        classes, palette = CLASSES, PALETTE
    else:
        from mmdet.datasets import CocoDataset
        classes, palette = CocoDataset.METAINFO['classes'], CocoDataset.METAINFO['palette']
    config = _config(tmp_path, kind)
    checkpoint = _checkpoint(config, tmp_path / 'model.pth', classes, palette)
    image = _image(tmp_path / 'street.jpg', (216, 344))
    out = tmp_path / 'out'
    _run(monkeypatch, config, checkpoint, image, '--out-dir', out, '--scale', 'native', '--score-thr', '0.0',
         '--device', 'cpu')
    assert backbone_inputs == [(224, 352)]
    assert cv2.imread(str(out / 'vis' / 'street.jpg')).shape == (216, 344, 3)
    preds = json.loads((out / 'preds' / 'street.json').read_text())
    boxes = np.array(preds['bboxes'])
    assert len(boxes) > 0 and len(preds['labels']) == len(preds['scores']) == len(boxes)
    assert (boxes[:, [0, 2]] <= 344 + 1e-3).all() and (boxes[:, [1, 3]] <= 216 + 1e-3).all() and (boxes >= 0).all()
    if kind != 'retinanet':
        assert len(preds['masks']) == len(boxes) and preds['masks'][0]['size'] == [216, 344]
    assert 'scale: native' in capsys.readouterr().out


def test_config_scale_still_resizes(tmp_path, monkeypatch, backbone_inputs):
    """Without --scale native the config's test resize applies (the mini config: 256x256, keeping the ratio)."""
    checkpoint = _checkpoint(DET_CONFIG, tmp_path / 'model.pth', CLASSES, PALETTE)
    image = _image(tmp_path / 'street.jpg', (216, 344))
    _run(monkeypatch, DET_CONFIG, checkpoint, image, '--out-dir', tmp_path / 'out', '--device', 'cpu')
    assert backbone_inputs == [(192, 256)]          # 216x344 -> 161x256, padded to 32


def test_segmentation_outputs_are_named_after_the_inputs(tmp_path, monkeypatch, capsys):
    """A folder: its non-image files are skipped and listed, each image's overlay and label map are named after
    it, small and thin images (a side below 32 px at native scale) are padded and cropped back to their own size,
    and a second run into the same folder says which outputs it replaces."""
    checkpoint = _checkpoint(SEG_CONFIG, tmp_path / 'model.pth', ('background',) + CLASSES, ((0, 0, 0),) + PALETTE)
    images = tmp_path / 'images'
    images.mkdir()
    shapes = {'field': (96, 128), 'tiny': (20, 20), 'strip': (24, 300)}
    for name, shape in shapes.items():
        _image(images / f'{name}.jpg', shape)
    (images / 'labels.json').write_text('{}')
    out = tmp_path / 'out'
    _run(monkeypatch, SEG_CONFIG, checkpoint, images, '--out-dir', out, '--scale', 'native', '--device', 'cpu')
    stdout = capsys.readouterr().out
    assert '[infer] skipped 1 file(s) that are not images: labels.json' in stdout
    assert '[infer] 3 image(s), scale: native' in stdout and 'replacing' not in stdout
    for name, shape in shapes.items():
        pred = cv2.imread(str(out / 'pred' / f'{name}.png'), cv2.IMREAD_UNCHANGED)
        assert pred.dtype == np.uint8 and pred.shape == shape and pred.max() <= len(CLASSES), name
        assert cv2.imread(str(out / 'vis' / f'{name}.jpg')).shape[:2] == shape, name
    assert sorted(os.listdir(out / 'pred')) == ['field.png', 'strip.png', 'tiny.png']
    _run(monkeypatch, SEG_CONFIG, checkpoint, images / 'tiny.jpg', '--out-dir', out, '--scale', 'native',
         '--device', 'cpu')
    assert '[infer] replacing 2 existing output(s) in' in capsys.readouterr().out


def test_a_thin_image_resized_below_the_minimum_is_padded_not_refused(tmp_path, monkeypatch, backbone_inputs):
    """The ADE20K configs' resize (2048x512, keeping the ratio) makes a 40x3000 image 27x2048: the config pads it
    to 32 rows at test time and the label map comes back at 40x3000."""
    config = tmp_path / 'ade_resize.py'
    config.write_text(
        f"_base_ = '{SEG_CONFIG}'\n"
        "test_pipeline = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(2048, 512), keep_ratio=True),\n"
        "                 dict(type='LoadAnnotations'), dict(type='PackSegInputs')]\n"
        'test_dataloader = dict(dataset=dict(pipeline=test_pipeline))\n')
    checkpoint = _checkpoint(SEG_CONFIG, tmp_path / 'model.pth', ('background',) + CLASSES, ((0, 0, 0),) + PALETTE)
    image = _image(tmp_path / 'thin.jpg', (40, 3000))
    _run(monkeypatch, config, checkpoint, image, '--out-dir', tmp_path / 'out', '--device', 'cpu')
    assert backbone_inputs == [(32, 2048)]
    assert cv2.imread(str(tmp_path / 'out' / 'pred' / 'thin.png'), cv2.IMREAD_UNCHANGED).shape == (40, 3000)


def test_inputs_are_checked_before_the_model_is_built(tmp_path, monkeypatch, capsys):
    """A missing image, a file that is no image, a mistyped config, a cut-off checkpoint and two inputs that would
    write the same outputs: each ends the run with one line (status 1) before any model is built."""
    checkpoint = tmp_path / 'model.pth'
    torch.save({'state_dict': {'w': torch.randn(64, 64)}}, checkpoint)
    image = _image(tmp_path / 'a.jpg', (64, 64))
    (tmp_path / 'b').mkdir()
    _image(tmp_path / 'b' / 'a.jpg', (64, 64))
    (tmp_path / 'labels.json').write_text('{}')
    data = checkpoint.read_bytes()
    (tmp_path / 'cut.pth').write_bytes(data[:len(data) // 2])
    monkeypatch.setattr(infer, 'build_config', lambda *a: pytest.fail('the model was set up'))
    cases = {
        (DET_CONFIG, checkpoint, tmp_path / 'nope.jpg'): f"image not found: '{tmp_path}/nope.jpg'",
        (DET_CONFIG, checkpoint, tmp_path / 'labels.json'): f"'{tmp_path}/labels.json' is not an image OpenCV can read",
        (DET_CONFIG[:-3] + 's.py', checkpoint, image): f"config not found: '{DET_CONFIG[:-3]}s.py' (did you mean "
                                                        f"'{DET_CONFIG}'?)",
        (DET_CONFIG, tmp_path / 'cut.pth', image): f"checkpoint '{tmp_path}/cut.pth' is cut off: the file has "
                                                   f"{len(data) // 2:,} bytes",
    }
    for argv, message in cases.items():
        with pytest.raises(SystemExit) as exit_:
            _run(monkeypatch, *argv)
        assert str(exit_.value.code).startswith(f'[infer] error: {message}'), exit_.value.code
    monkeypatch.undo()
    with pytest.raises(SystemExit) as exit_:
        _run(monkeypatch, DET_CONFIG, checkpoint, image, tmp_path / 'b' / 'a.jpg')
    assert exit_.value.code == (f"[infer] error: '{image}' and '{tmp_path}/b/a.jpg' would both write vis/a.jpg: give "
                                'images with different names (or run them into different --out-dir folders)')
    # As a user sees it: one line on stderr, status 1, nothing on stdout.
    cli = subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'infer.py'), DET_CONFIG, str(tmp_path / 'cut.pth'),
                          image], capture_output=True, text=True, timeout=300)
    assert cli.returncode == 1 and cli.stdout == '', cli.stdout + cli.stderr
    assert cli.stderr.count('\n') == 1 and cli.stderr.startswith('[infer] error: checkpoint '), cli.stderr


def test_slide_predicts_a_large_image_in_several_crops(tmp_path, monkeypatch, capsys):
    """docs/large_images.md: a segmentation at the image's own size in 3 x 3 crops (mmseg's slide mode) writes
    the same outputs as whole-image inference, prints the crop grid, time and memory; --slide on a detector is
    refused in one line."""
    import re

    checkpoint = _checkpoint(SEG_CONFIG, tmp_path / 'model.pth', ('background',) + CLASSES, ((0, 0, 0),) + PALETTE)
    image = _image(tmp_path / 'scene.jpg', (256, 256))
    preds = {}
    for mode in ('whole', 'slide'):
        extra = ['--slide', '128', '96'] if mode == 'slide' else []
        _run(monkeypatch, SEG_CONFIG, checkpoint, image, '--out-dir', tmp_path / mode, '--device', 'cpu', '--scale',
             'native', *extra)
        stdout = capsys.readouterr().out
        assert re.search(r'\[infer\] [\d.]+ s for 1 image\(s\).*peak \d+ MB resident', stdout), stdout
        preds[mode] = cv2.imread(str(tmp_path / mode / 'pred' / 'scene.png'), cv2.IMREAD_UNCHANGED)
        assert preds[mode].shape == (256, 256)
    assert 'scene.jpg: 256x256 -> 3 x 3 crops' in stdout and 'slide, crops of 128 px every 96 px' in stdout
    assert not (preds['whole'] == preds['slide']).all()          # attention within crops is not the whole image's
    refused = subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'infer.py'), DET_CONFIG, checkpoint, image,
                              '--slide', '128', '96'], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and '--slide is for segmentation configs' in refused.stderr.splitlines()[-1]
