"""tools/analysis_tools/analyze_attention.py end to end on a generated shapes image; the backbone builder's checkpoint
path."""
import csv
import json
import os
import os.path as osp
import subprocess
import sys

import cv2
import mmcv
import numpy as np
import pytest
import torch

from inline_backbones import InLineSwinTransformer
from inline_backbones.analysis.inputs import build_backbone, object_points
from inline_backbones.data.shapes import render_image
from inline_backbones.openmmlab.analysis_config import config_resize_args

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SEG_CONFIG = osp.join(ROOT, 'mmseg_configs', 'inline-swin-mini_upernet_shapes-256x256.py')
DET_CONFIG = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-mini_fpn_shapes.py')


@pytest.fixture(scope='module')
def image(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('img') / 'shapes.png')
    mmcv.imwrite(render_image(np.random.default_rng(5), 128)[0], path)
    return path


@pytest.mark.slow
def test_tool_writes_json_csv_and_pictures(image, tmp_path):
    pytest.importorskip('mmseg')
    out = subprocess.run(
        [sys.executable, osp.join(ROOT, 'tools', 'analysis_tools', 'analyze_attention.py'), image, image,
         '--config', SEG_CONFIG,
         '--size', '96', '128', '--num-queries', '40', '--num-pairs', '30', '--seed', '7', '--num-points', '2',
         '--out-dir', str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert out.returncode == 0, out.stderr[-3000:]
    assert '40 sampled queries, seed 7' in out.stdout
    data = json.loads((tmp_path / 'attention_stats.json').read_text())
    assert data['settings']['num_queries'] == 40 and data['settings']['seed'] == 7
    assert data['settings']['checkpoint'] == 'random weights' and data['settings']['attn_type'] == 'IIIS'
    names = ['layers.0.blocks.0.attn', 'layers.0.blocks.1.attn', 'layers.1.blocks.0.attn',
             'layers.1.blocks.1.attn', 'layers.2.blocks.0.attn', 'layers.2.blocks.1.attn']
    assert [row['layer'] for row in data['summary']] == names
    assert len(data['images']) == 2 and data['images'][0]['input_hw'] == [96, 128]
    first = data['images'][0]['layers'][0]
    assert first['hw_shape'] == [24, 32] and first['num_queries'] == 40 and first['num_pairs'] == 70
    for row in data['summary']:
        assert 0 <= row['negative.negative_share'] < 1 and row['locality_linear.ratio_3x3'] > 0
        assert 0 <= row['injectivity_linear.tv_median'] <= 1 and row['residual_to_attention_norm'] > 0
    with open(tmp_path / 'attention_stats.csv') as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * (2 * 1 + 2 * 2 + 2 * 4)                  # images x (blocks x heads)
    assert float(rows[0]['negative.negative_share']) == first['heads'][0]['negative']['negative_share']
    pictures = sorted(p.name for p in tmp_path.glob('*.png'))
    assert pictures == ['maps_shapes_layers_0_blocks_1_attn.png', 'maps_shapes_layers_1_blocks_1_attn.png',
                        'maps_shapes_layers_2_blocks_1_attn.png', 'pairs.png', 'summary.png']
    assert all(5_000 < (tmp_path / p).stat().st_size < 200_000 for p in pictures)


def test_backbone_from_a_detector_checkpoint_and_test_scale(tmp_path):
    pytest.importorskip('mmdet')
    reference, _ = build_backbone(DET_CONFIG)
    path = str(tmp_path / 'det.pth')
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in reference.state_dict().items()}}, path)
    loaded, norm = build_backbone(DET_CONFIG, checkpoint=path, prefix='backbone.', kernel_func='relu')
    assert isinstance(loaded, InLineSwinTransformer) and not loaded.training
    assert loaded.layers[0].blocks[0].attn.kernel_func == 'relu'
    for (name, a), b in zip(reference.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert norm['std'] == [58.395, 57.12, 57.375] and norm['bgr_to_rgb']
    assert config_resize_args(DET_CONFIG) == ((256, 256), True)
    with pytest.raises(ValueError, match='exactly one'):
        build_backbone(DET_CONFIG, arch='tiny')


def test_points_are_picked_on_objects():
    rgb = np.full((64, 64, 3), 128, np.uint8)
    rgb[5:15, 40:60] = (250, 20, 20)
    rgb[45:60, 5:20] = (20, 20, 250)
    points = object_points(rgb, 2)
    inside = [(40 <= x < 60 and 5 <= y < 15) or (5 <= x < 20 and 45 <= y < 60) for x, y in points]
    assert len(points) == 2 and all(inside)
    assert (points[0][0] < 30) != (points[1][0] < 30)                           # one on each object


def test_images_are_resized_as_mmcv_resizes(tmp_path):
    """The analysis reads and resizes images with OpenCV (no OpenMMLab needed): ``--size`` gives mmcv's ``imresize``
    exactly, and a config's test ``Resize`` is mmcv's own (``imrescale`` keeping the ratio)."""
    mmcv = pytest.importorskip('mmcv')
    from inline_backbones.analysis.inputs import IMAGENET_NORM, load_image
    from inline_backbones.openmmlab.analysis_config import config_resize

    path = str(tmp_path / 'image.png')
    cv2.imwrite(path, np.random.default_rng(0).integers(0, 256, (37, 53, 3), dtype=np.uint8))
    rgb, tensor = load_image(path, IMAGENET_NORM, size=(20, 30))
    assert np.array_equal(rgb, mmcv.bgr2rgb(mmcv.imresize(mmcv.imread(path), (30, 20))))
    assert tensor.shape == (1, 3, 20, 30)
    rgb, tensor = load_image(path, IMAGENET_NORM, resize=config_resize(DET_CONFIG))
    assert np.array_equal(rgb, mmcv.bgr2rgb(mmcv.imrescale(mmcv.imread(path), (256, 256))))
    assert tensor.shape[2:] == rgb.shape[:2] == (179, 256)   # 37 x 53 scaled by 256 / 53
