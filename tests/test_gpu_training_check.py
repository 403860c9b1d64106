"""tools/device/gpu_training_check.sh (the training device script) and tools/setup/fetch_gpu_wheels.sh without a GPU:
syntax, the dry run's plan (the CUDA build first, the CPU-ops fallback, the run matrix in priority order),
and that the carried wheels plus the GPU image's packages cover every runtime need of the stack."""
import os
import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from inline_backbones.openmmlab.line import check_one_line

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / 'tools' / 'device' / 'gpu_training_check.sh'
FETCH = ROOT / 'tools' / 'setup' / 'fetch_gpu_wheels.sh'
BACKBONE_CHECK = ROOT / 'tools' / 'device' / 'gpu_backbone_check.sh'
# Python packages of the GPU machine's image that the stack needs (/work/.library/device/KINDS.md's list).
GPU_IMAGE = {'numpy', 'scipy', 'matplotlib', 'six', 'tqdm', 'packaging', 'pillow', 'pyyaml', 'rich', 'regex',
             'opencv-python-headless', 'psutil', 'ninja', 'wheel', 'torch', 'torchvision', 'timm'}


def test_scripts_parse():
    for script in (CHECK, FETCH, BACKBONE_CHECK):
        assert subprocess.run(['bash', '-n', str(script)], capture_output=True).returncode == 0, script


def test_dry_run_plans_build_then_matrix(tmp_path):
    out = subprocess.run(['bash', str(CHECK)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, 'DRY_RUN': '1', 'OUT': str(tmp_path / 'out'),
                              'RECORDS': str(tmp_path / 'rec')})
    assert out.returncode == 0, out.stderr
    cmds = [line[2:] for line in out.stdout.splitlines() if line.startswith('+ ')]
    assert '-m pip install -q --no-index --no-deps' in cmds[0] and '--target /tmp/site' in cmds[0]
    assert cmds[1].endswith('bash tools/setup/setup_env.sh --mmcv-wheel --cuda') and 'PIP_NO_INDEX=1' in cmds[1]
    runs = [c for c in cmds if 'benchmark_training.py' in c]
    first = runs[0]
    assert 'inline-swin-tiny-in1k-pre_upernet' in first and '--amp fp16' in first and '--iters 50' in first
    assert 'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py' in runs[1]
    assert any('mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py' in c and '--amp bf16' in c for c in runs)
    assert any('mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py' in c for c in runs)
    assert any('--padding-aware off' in c and 'upernet' in c for c in runs)
    ddp = [c for c in runs if '--launcher pytorch' in c]
    assert len(ddp) == 1
    assert '-m torch.distributed.run --nproc_per_node 1 tools/analysis_tools/benchmark_training.py' in ddp[0]
    assert sum('--backbone-only' in c for c in runs) == 18
    assert all(re.search(r'--out \S+\.json$', c) for c in runs)
    assert out.stdout.strip().endswith(f'dry run: {len(runs)} runs planned, nothing run')
    # every figure's command is kept for the docs
    assert (tmp_path / 'out' / 'log.txt').read_text().count('benchmark_training.py') == len(runs)


def _requires(dist):
    """``dist``'s runtime needs on the GPU machine (CPython 3.12 on Linux, no extras)."""
    from packaging.requirements import Requirement

    env = {'python_version': '3.12', 'python_full_version': '3.12.3', 'sys_platform': 'linux',
           'platform_system': 'Linux', 'platform_machine': 'x86_64', 'extra': ''}
    needs = (Requirement(r) for r in metadata.requires(dist) or [])
    return {r.name.lower().replace('_', '-') for r in needs if r.marker is None or r.marker.evaluate(env)}


@pytest.mark.skipif(check_one_line() != 'official', reason='the GPU route carries the official OpenMMLab line, whose '
                    'installed metadata this test reads; run it where that line is installed (the default)')
def test_carried_wheels_and_the_image_cover_the_stacks_needs():
    text = FETCH.read_text()
    carried = {m.lower() for m in re.findall(r'([A-Za-z][\w-]*)==[\d.]+', text)}
    carried |= {m.lower() for m in re.findall(r'pin ([a-z]+)\)', text)}
    assert {'mmengine', 'mmdet', 'mmsegmentation', 'mmcv', 'pycocotools', 'setuptools'} <= carried
    have = carried | GPU_IMAGE | {'opencv-python'}        # mmengine asks for opencv-python; headless serves it
    for dist in ('mmengine', 'mmcv', 'mmdet', 'mmsegmentation', 'pycocotools', 'shapely', 'prettytable', 'ftfy',
                 'yapf', 'termcolor', 'addict', 'terminaltables', 'platformdirs', 'wcwidth'):
        missing = _requires(dist) - have
        assert not missing, f'{dist} needs {missing}: carry them (tools/setup/fetch_gpu_wheels.sh) or check the image'


def test_backbone_check_dry_run_plans_the_gpu_tests_then_every_benchmark(tmp_path):
    """The backbone device script (tools/device/gpu_backbone_check.sh): the carried wheels, the GPU tests, then ten
    runs of tools/analysis_tools/benchmark.py (FLatten-Swin-T and InLine-CSwin-T among them) whose options the tool
    accepts (each parsed by the tool's own argument parser)."""
    from inline_backbones.benchmark.options import parse_args

    out = subprocess.run(['bash', str(BACKBONE_CHECK)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, 'DRY_RUN': '1', 'OUT': str(tmp_path / 'out')})
    assert out.returncode == 0, out.stderr
    cmds = [line[2:] for line in out.stdout.splitlines() if line.startswith('+ ')]
    assert '--target /tmp/site' in cmds[0] and 'tests/test_gpu_paths.py' in cmds[1]
    tool = 'tools/analysis_tools/benchmark.py '
    benches = [c.split(tool, 1)[1] for c in cmds if tool in c]
    assert len(benches) == 10 and any('--cuda-graphs' in b for b in benches) and any('--train' in b for b in benches)
    assert any('flatten-swin-t' in b and 'inline-cswin-t' in b for b in benches)
    for b in benches:
        parse_args(b.split())
