"""tools/get_flops.py, tools/infer.py and tools/measure_padding.py end to end (small models, random weights)."""
import json
import os
import os.path as osp
import re
import subprocess
import sys

import cv2
import pytest
import torch
from shapes_dataset import CLASSES, PALETTE, generate_shapes_dataset

from inline_backbones.analysis import flop_analyzer

pytestmark = pytest.mark.slow

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DET_CONFIG = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-mini_fpn_shapes.py')
SEG_CONFIG = osp.join(ROOT, 'mmseg_configs', 'inline-swin-mini_upernet_shapes-256x256.py')


def _tool(name, *args, cwd=None):
    out = subprocess.run([sys.executable, osp.join(ROOT, 'tools', name), *args], capture_output=True, text=True,
                         timeout=600, cwd=cwd, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    return out.stdout


@pytest.fixture(scope='module')
def get_flops():
    sys.path.insert(0, osp.join(ROOT, 'tools'))
    try:
        import get_flops
        yield get_flops
    finally:
        sys.path.remove(osp.join(ROOT, 'tools'))


def test_get_flops_counts_the_whole_model_and_prints_it(get_flops):
    params, flops, shape = get_flops.count(DET_CONFIG, (128, 160))
    task, model, _ = get_flops.build(DET_CONFIG)
    assert task == 'mmdet' and shape == (128, 160)
    assert params == sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        backbone = flop_analyzer(model.backbone, (torch.randn(1, 3, 128, 160),)).total()
    assert flops > backbone > 0                   # neck and heads counted on top of the backbone
    stdout = _tool('get_flops.py', DET_CONFIG, SEG_CONFIG, '--shape', '128', '160', '--markdown')
    det = re.search(r'mask-rcnn_inline-swin-mini_fpn_shapes\.py: params ([\d.]+)M, FLOPs (\d+)G at 128x160', stdout)
    assert det and det.group(1) == f'{params / 1e6:.1f}' and det.group(2) == f'{flops / 1e9:.0f}', stdout
    assert 'inline-swin-mini_upernet_shapes-256x256.py: params' in stdout
    assert '| config | params | FLOPs | input (HxW) |' in stdout


def _checkpoint(get_flops, config, path):
    """A Runner-style checkpoint of the config's model (random weights) with the dataset's class names."""
    _, model, _ = get_flops.build(config)
    torch.save({'state_dict': model.state_dict(),
                'meta': {'dataset_meta': {'classes': CLASSES, 'palette': [list(c) for c in PALETTE]}}}, path)


@pytest.mark.parametrize('config', [DET_CONFIG, SEG_CONFIG], ids=['mmdet', 'mmseg'])
def test_infer_writes_visualisations(get_flops, config, tmp_path):
    generate_shapes_dataset(str(tmp_path / 'data'), num_train=0, num_val=1, seed=0)
    image = str(tmp_path / 'data' / 'images' / 'val' / '00001.jpg')
    _checkpoint(get_flops, config, tmp_path / 'model.pth')
    out_dir = tmp_path / 'out'
    stdout = _tool('infer.py', config, str(tmp_path / 'model.pth'), image, '--out-dir', str(out_dir),
                   '--device', 'cpu', '--score-thr', '0.0')
    assert f'visualisations written to {out_dir}/vis' in stdout
    vis = cv2.imread(str(out_dir / 'vis' / '00001.jpg'))
    assert vis is not None and vis.shape == (256, 256, 3)
    if config == DET_CONFIG:
        with open(out_dir / 'preds' / '00001.json') as f:
            preds = json.load(f)
        assert len(preds['labels']) == len(preds['scores']) == len(preds['bboxes']) > 0
        assert all(0 <= label < len(CLASSES) for label in preds['labels'])


def test_infer_slides_a_large_image_in_several_crops(get_flops, tmp_path):
    """docs/large_images.md: a segmentation at the image's own size in 3 x 3 crops (mmseg's slide mode) writes
    the same kind of outputs as whole-image inference, prints the crop grid, time and memory; --slide on a
    detector is refused in one line."""
    generate_shapes_dataset(str(tmp_path / 'data'), num_train=0, num_val=1, seed=0)
    image = str(tmp_path / 'data' / 'images' / 'val' / '00001.jpg')
    _checkpoint(get_flops, SEG_CONFIG, tmp_path / 'model.pth')
    preds = {}
    for mode in ('whole', 'slide'):
        out_dir = tmp_path / mode
        extra = ['--slide', '128', '96'] if mode == 'slide' else []
        stdout = _tool('infer.py', SEG_CONFIG, str(tmp_path / 'model.pth'), image, '--out-dir', str(out_dir),
                       '--device', 'cpu', '--scale', 'native', *extra)
        assert re.search(r'\[infer\] [\d.]+ s for 1 image\(s\).*peak \d+ MB resident', stdout), stdout
        (pred,) = (out_dir / 'pred').glob('*.png')                # mmseg names it by index
        preds[mode] = cv2.imread(str(pred), cv2.IMREAD_UNCHANGED)
        assert preds[mode] is not None and preds[mode].shape == (256, 256)
    assert '00001.jpg: 256x256 -> 3 x 3 crops' in stdout and 'slide, crops of 128 px every 96 px' in stdout
    assert not (preds['whole'] == preds['slide']).all()          # attention within crops is not the whole image's
    refused = subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'infer.py'), DET_CONFIG, 'x.pth', image,
                              '--slide', '128', '96'], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and '--slide is for segmentation configs' in refused.stderr.splitlines()[-1]


def test_measure_padding_table_and_latency():
    """The padding table: padding changes the default backbone's features on the image's region and
    not the padding-aware one's; the latency mode times each mode, the first at ratio 1."""
    out = _tool('measure_padding.py', '--image', '64x96', '--padded', '96x128', '--models', 'inline-swin-t',
                'inline-swin-t-pa')
    rows = {line.split('|')[1].strip(): [float(v) for v in line.split('|')[2].split()]
            for line in out.splitlines() if line.startswith('| inline')}
    assert len(rows['inline-swin-t']) == len(rows['inline-swin-t-pa']) == 4
    assert min(rows['inline-swin-t']) > 1e-3 and max(rows['inline-swin-t-pa']) < 1e-5, rows
    out = _tool('measure_padding.py', '--latency', '--latency-image', '64x80', '--repeats', '1', '--models',
                'inline-swin-t', 'inline-swin-t-pa')
    ratios = {line.split('|')[1].strip(): float(line.split('|')[4]) for line in out.splitlines()
              if line.startswith('| inline')}
    assert ratios['inline-swin-t'] == 1.0 and ratios['inline-swin-t-pa'] > 0
