import subprocess
import sys

import pytest
import torch


def _imported_after(code):
    out = subprocess.run([sys.executable, '-c', code + '\nimport sys\n'
                          'print(sorted(m for m in ("mmdet", "mmseg") if m in sys.modules))'],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_package_imports_neither_mmdet_nor_mmseg():
    assert _imported_after('from inline_backbones import InLineSwinTransformer') == '[]'


@pytest.mark.parametrize('task', ['mmdet', 'mmseg'])
def test_built_from_task_registry_without_importing_the_other_task(task):
    """Built through mmdet's (mmseg's) registry, our package adds no import of the other task.

    (``mmseg.models`` itself imports mmdet when it is installed, for Mask2Former; that is mmseg's doing.)
    """
    other = 'mmseg' if task == 'mmdet' else 'mmdet'
    code = (f'import sys\n'
            f'from mmengine.registry import init_default_scope\n'
            f'from {task}.registry import MODELS\n'
            f'import {task}.models\n'
            f'init_default_scope("{task}")\n'
            f'before = "{other}" in sys.modules\n'
            f'import inline_backbones\n'
            f'm = MODELS.build(dict(type="inline_backbones.InLineSwinTransformer", arch="tiny"))\n'
            f'assert type(m).__name__ == "InLineSwinTransformer", type(m)\n'
            f'print(before, "{other}" in sys.modules)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    before, after = out.stdout.split()[-2:]
    assert before == after, f'building through {task} imported {other}'


def test_custom_imports_through_config(tmp_path):
    """The path users take: custom_imports in a config, scope prefix in the backbone type."""
    from mmengine.config import Config
    from mmengine.registry import MODELS

    cfg_file = tmp_path / 'cfg.py'
    cfg_file.write_text("custom_imports = dict(imports=['inline_backbones'], allow_failed_imports=False)\n"
                        "backbone = dict(type='inline_backbones.InLineSwinTransformer', arch='tiny',"
                        " attn_type='IISS', out_indices=(3,))\n")
    cfg = Config.fromfile(str(cfg_file))
    model = MODELS.build(cfg.backbone)
    assert model.attn_type == 'IISS'
    assert model.eval()(torch.randn(1, 3, 64, 64))[0].shape == (1, 768, 2, 2)
