"""Registration: one class for mmdet and mmseg through the ``inline_backbones`` scope, no cross imports
of the task packages, and no clash with the task registries' own names."""
import json
import subprocess
import sys

import pytest
import torch


def _task_modules_after(code):
    """The mmdet/mmseg modules loaded after running ``code`` in a fresh interpreter."""
    out = subprocess.run([sys.executable, '-c', code + '\nimport sys, json\n'
                          'print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("mmdet", "mmseg"))))'],
                         capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _build_through(task, ours=True, extra=''):
    """Build a backbone through ``task``'s registry: ours (prefixed type) or, as the baseline, one of the
    task's own backbones (which loads the task's registry locations the same way)."""
    backbone = 'dict(type="inline_backbones.InLineSwinTransformer", arch="tiny")' if ours else (
        'dict(type="ResNet", depth=18)' if task == 'mmdet' else 'dict(type="ResNetV1c", depth=18)')
    return (f'from mmengine.registry import init_default_scope\n'
            f'from {task}.registry import MODELS\n'
            f'init_default_scope("{task}")\n'
            + ('import inline_backbones\n' if ours else '') + extra +
            f'm = MODELS.build({backbone})\n'
            f'assert type(m).__name__ in ("InLineSwinTransformer", "ResNet", "ResNetV1c"), type(m)\n')


@pytest.mark.slow
def test_package_imports_neither_mmdet_nor_mmseg():
    pytest.importorskip('mmengine', reason="the registry is mmengine's")
    code = ('import torch\nfrom inline_backbones import MODELS\n'
            'm = MODELS.build(dict(type="InLineSwinTransformer", arch="tiny")).eval()\n'
            'assert m(torch.randn(1, 3, 64, 64))[3].shape == (1, 768, 2, 2)\n')
    assert _task_modules_after(code) == set()


@pytest.mark.slow
@pytest.mark.parametrize('task', ['mmdet', 'mmseg'])
def test_built_from_task_registry_without_importing_more_of_the_other_task(task):
    """Importing our package and building through mmdet's (mmseg's) registry loads no module of the other
    task package beyond what building one of the task's own backbones loads (``mmseg.models`` imports
    parts of mmdet itself when it is installed; mmdet imports nothing of mmseg)."""
    other = 'mmseg' if task == 'mmdet' else 'mmdet'
    ours = {m for m in _task_modules_after(_build_through(task)) if m.startswith(other)}
    baseline = {m for m in _task_modules_after(_build_through(task, ours=False)) if m.startswith(other)}
    assert ours == baseline, sorted(ours - baseline)
    if task == 'mmdet':
        assert ours == set()
        # The check can fail: one extra import of the other package shows up (shown once, through mmdet).
        polluted = _task_modules_after(_build_through(task, extra=f'import {other}.apis\n'))
        assert {m for m in polluted if m.startswith(other)} - baseline


@pytest.mark.parametrize('task', ['mmdet', 'mmseg'])
def test_no_clash_with_the_task_registries(task):
    """Under a task's default scope the unprefixed name is not found (a clear KeyError, no fallback to
    another class), the prefixed one is, and the task's own Swin is untouched by our registry."""
    pytest.importorskip(task)
    registry = __import__(f'{task}.registry', fromlist=['MODELS']).MODELS
    from mmengine.registry import DefaultScope

    import inline_backbones

    with DefaultScope.overwrite_default_scope(task):
        with pytest.raises(KeyError, match='InLineSwinTransformer'):
            registry.build(dict(type='InLineSwinTransformer', arch='tiny'))
        ours = registry.build(dict(type='inline_backbones.InLineSwinTransformer', arch='tiny'))
        assert type(ours) is inline_backbones.InLineSwinTransformer
        if task == 'mmdet':
            swin = registry.build(dict(type='SwinTransformer', embed_dims=32, depths=[1, 1, 1, 1],
                                       num_heads=[1, 2, 4, 8]))
            assert type(swin).__module__ == 'mmdet.models.backbones.swin'
    assert inline_backbones.MODELS.get('SwinTransformer') is None
    assert inline_backbones.MODELS.scope == 'inline_backbones'


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
