"""tools/analysis_tools/get_flops.py, tools/analysis_tools/measure_padding.py, tools/train.py and tools/test.py end
to end (small models, random weights; tools/infer.py: test_infer.py)."""
import os
import os.path as osp
import re
import subprocess
import sys

import pytest
import torch
from tool_modules import load_tool

from inline_backbones.analysis.flops import flop_analyzer
from inline_backbones.openmmlab.task_tools import build_task_model

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
    return load_tool('tools/analysis_tools/get_flops.py')


def test_get_flops_counts_the_whole_model_and_prints_it(get_flops):
    params, flops, shape = get_flops.count(DET_CONFIG, (128, 160))
    task, model, _ = build_task_model(DET_CONFIG)
    assert task == 'mmdet' and shape == (128, 160)
    assert params == sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        backbone = flop_analyzer(model.backbone, (torch.randn(1, 3, 128, 160),)).total()
    assert flops > backbone > 0                   # neck and heads counted on top of the backbone
    stdout = _tool('analysis_tools/get_flops.py', DET_CONFIG, SEG_CONFIG, '--shape', '128', '160', '--markdown')
    det = re.search(r'mask-rcnn_inline-swin-mini_fpn_shapes\.py: params ([\d.]+)M, FLOPs (\d+)G at 128x160', stdout)
    assert det and det.group(1) == f'{params / 1e6:.1f}' and det.group(2) == f'{flops / 1e9:.0f}', stdout
    assert 'inline-swin-mini_upernet_shapes-256x256.py: params' in stdout
    assert '| config | params | FLOPs | input (HxW) |' in stdout


def test_measure_padding_table_and_latency():
    """The padding table: padding changes the default backbone's features on the image's region and
    not the padding-aware one's; the latency mode times each mode, the first at ratio 1."""
    out = _tool('analysis_tools/measure_padding.py', '--image', '64x96', '--padded', '96x128', '--models',
                'inline-swin-t', 'inline-swin-t-pa')
    rows = {line.split('|')[1].strip(): [float(v) for v in line.split('|')[2].split()]
            for line in out.splitlines() if line.startswith('| inline')}
    assert len(rows['inline-swin-t']) == len(rows['inline-swin-t-pa']) == 4
    assert min(rows['inline-swin-t']) > 1e-3 and max(rows['inline-swin-t-pa']) < 1e-5, rows
    out = _tool('analysis_tools/measure_padding.py', '--latency', '--latency-image', '64x80', '--repeats', '1',
                '--models', 'inline-swin-t', 'inline-swin-t-pa')
    ratios = {line.split('|')[1].strip(): float(line.split('|')[4]) for line in out.splitlines()
              if line.startswith('| inline')}
    assert ratios['inline-swin-t'] == 1.0 and ratios['inline-swin-t-pa'] > 0


@pytest.mark.parametrize('tool', ['train.py', 'test.py'])
def test_train_and_test_refuse_a_mistyped_config_in_one_line(tool):
    typo = DET_CONFIG.replace('shapes', 'shape')
    out = subprocess.run([sys.executable, osp.join(ROOT, 'tools', tool), typo], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1 and out.stdout == ''
    assert out.stderr == (f"[{tool[:-3]}] error: config not found: '{typo}' (did you mean '{DET_CONFIG}'?)\n")
