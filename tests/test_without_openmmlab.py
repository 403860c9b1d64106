"""The timm, transformers and tool routes with no OpenMMLab line installed.

The routes run in fresh interpreters in which no module of a line can be imported: each of
``inline_backbones.frameworks.OPENMMLAB_MODULES`` is ``None`` in ``sys.modules`` before anything else, so that its
import raises ``ModuleNotFoundError`` and ``importlib.util.find_spec`` gives None, as on a machine that never installed
one (where none is installed, as in CI's leg without OpenMMLab, that changes nothing). Each script ends by asserting
that no such module was imported. The in-process tests check what an OpenMMLab name says when no line is there.
"""
import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from released_fixtures import checkpoint_path, mini_arch

import inline_backbones
from inline_backbones import frameworks
from inline_backbones.checkpoints.loading import load_checkpoint_file
from inline_backbones.cli import ConfigOptions, user_message
from inline_backbones.frameworks import OPENMMLAB_MODULES, OpenMMLabNotInstalled

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = f'''\
import sys
for _name in {OPENMMLAB_MODULES!r}:
    sys.modules[_name] = None
'''
EPILOGUE = f'''
_loaded = sorted(n for n, m in sys.modules.items() if m is not None and n.split('.')[0] in {OPENMMLAB_MODULES!r})
assert not _loaded, f'OpenMMLab modules imported: {{_loaded}}'
print('no OpenMMLab module imported')
'''


def run_without_openmmlab(code, tmp_path, timeout=600):
    """Run ``code`` in a fresh interpreter without OpenMMLab (module docstring); returns its stdout."""
    script = tmp_path / 'route.py'
    script.write_text(PRELUDE + textwrap.dedent(code) + EPILOGUE)
    env = {'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path), 'TORCH_HOME': str(tmp_path / 'torch_home'),
           'PYTHONPATH': f'{ROOT}{":" + str(ROOT / "tests")}', 'OMP_NUM_THREADS': '2', 'HF_HUB_OFFLINE': '1'}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f'{done.stdout[-3000:]}\n{done.stderr[-6000:]}'
    assert 'no OpenMMLab module imported' in done.stdout
    return done.stdout


@pytest.fixture
def no_line(monkeypatch):
    """This process as if no line were installed, for what is checked at use (the edge stays as it was)."""
    monkeypatch.setattr(frameworks, 'openmmlab_installed', lambda: False)
    monkeypatch.setitem(frameworks._lent, 'initialize', frameworks._no_initializer)


def test_openmmlab_names_need_a_line_at_use(no_line):
    for name in ('MODELS', 'allow_mmengine_checkpoints'):
        with pytest.raises(OpenMMLabNotInstalled, match=rf"^inline_backbones\.{name} needs an OpenMMLab line, and "
                                                        r"none is installed: pip install -e '\.\[official\]'.*"
                                                        r"-e '\.\[onedl\]'") as err:
            getattr(inline_backbones, name)
        assert '\n' not in str(err.value) and isinstance(err.value, ModuleNotFoundError)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        inline_backbones.NoSuchName   # noqa: B018


def test_an_mmengine_init_cfg_needs_a_line_a_pretrained_one_does_not(no_line, tmp_path):
    backbone = inline_backbones.InLineSwinTransformer(
        arch=dict(embed_dims=16, depths=[1, 1], num_heads=[1, 2]), attn_type='II', out_indices=(1,),
        init_cfg=dict(type='Kaiming', layer='Linear'))
    with pytest.raises(OpenMMLabNotInstalled, match=r"init_cfg \{'type': 'Kaiming', 'layer': 'Linear'\} of "
                                                    r"InLineSwinTransformer \(mmengine's initializers\) needs an "
                                                    r"OpenMMLab line.*\[official\].*\[onedl\]"):
        backbone.init_weights()
    assert not backbone.is_init
    path = tmp_path / 'backbone.pth'
    torch.save(backbone.state_dict(), path)
    loaded = inline_backbones.InLineSwinTransformer(
        arch=dict(embed_dims=16, depths=[1, 1], num_heads=[1, 2]), attn_type='II', out_indices=(1,),
        init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    loaded.init_weights()
    assert loaded.is_init
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), backbone.state_dict().values(),
                                                 strict=True))


def test_cfg_options_of_a_tool_need_a_line_in_one_line(no_line):
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', action=ConfigOptions)
    assert parser.parse_args([]).cfg_options is None                  # not given: nothing imported, nothing asked
    with pytest.raises(OpenMMLabNotInstalled) as err:
        parser.parse_args(['--cfg-options', 'model.backbone.drop_path_rate=0.3'])
    assert user_message(err.value).startswith('--cfg-options needs an OpenMMLab line, and none is installed')


def test_an_mmengine_checkpoint_without_a_line_names_the_extras(no_line, tmp_path):
    """A file that pickles mmengine's objects (a Runner checkpoint's message hub) cannot be read without mmengine: the
    error says so and names the extras, not that the file is damaged."""
    config_dict = pytest.importorskip('mmengine.config').ConfigDict    # an mmengine object the loader does not allow
    path = tmp_path / 'runner.pth'
    torch.save({'state_dict': {'w': torch.zeros(2)}, 'meta': config_dict(a=1)}, path)
    with pytest.raises(OpenMMLabNotInstalled, match=r"runner\.pth' \(an mmengine Runner checkpoint.*needs an "
                                                    r"OpenMMLab line.*\[official\].*\[onedl\]"):
        load_checkpoint_file(str(path))


@pytest.mark.slow
def test_timm_route(tmp_path, serve):
    """``import inline_backbones`` registers every timm model; ``features_only``, ``forward_intermediates``,
    ``in_chans``, ``img_size``, ``pretrained=True`` from a released link (the package's loader: download, checks,
    strict filter) and the ONNX export of a feature extractor, checked in onnxruntime."""
    file = checkpoint_path('IIIS')
    base, log = serve({'/mini-IIIS.pth': [(200, file.read_bytes())]})
    arch = dict(mini_arch('IIIS'), attn_type='IIIS', drop_path_rate=0.)
    out = run_without_openmmlab(f'''
        import importlib.util
        import numpy as np
        import timm
        import torch
        import inline_backbones
        from inline_backbones.deployment.onnx_export import export_onnx, onnxruntime_session, run_onnx

        assert importlib.util.find_spec('mmengine') is None and not inline_backbones.openmmlab_installed()
        names = timm.list_models(['inline_*', 'flatten_*'])
        assert len(names) == 16, names
        arch = {json.dumps(arch)}
        x = torch.randn(2, 3, 224, 224)
        released = timm.create_model('inline_swin_tiny', pretrained=True,
                                     pretrained_cfg_overlay=dict(url='{base}/mini-IIIS.pth'), **arch).eval()
        local = timm.create_model('inline_swin_tiny', pretrained=True,
                                  pretrained_cfg_overlay=dict(file={str(file)!r}), **arch).eval()
        assert all(torch.equal(a, b) for a, b in zip(released.state_dict().values(), local.state_dict().values()))
        features = timm.create_model('inline_swin_tiny', pretrained=True, features_only=True, out_indices=(1, 2, 3),
                                     pretrained_cfg_overlay=dict(file={str(file)!r}), **arch).eval()
        with torch.no_grad():
            maps = features(x)
            final, intermediates = released.forward_intermediates(x, indices=(1, 2, 3))
            assert torch.equal(released.forward_head(final), released(x))
        assert [tuple(m.shape[1:]) for m in maps] == [tuple(m.shape[1:]) for m in intermediates]
        assert features.feature_info.reduction() == [8, 16, 32]
        for a, b in zip(maps, intermediates):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        grey = timm.create_model('inline_swin_tiny', pretrained=True, in_chans=1, img_size=256,
                                 pretrained_cfg_overlay=dict(file={str(file)!r}), **arch).eval()
        with torch.no_grad():
            assert grey(torch.randn(1, 1, 256, 256)).shape == (1, 1000)
        export_onnx(features, x[:1], 'features.onnx')
        outputs = run_onnx(onnxruntime_session('features.onnx'), x[:1])
        with torch.no_grad():
            for got, want in zip(outputs, features(x[:1]), strict=True):
                np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
        print('timm route ok')
    ''', tmp_path)
    assert 'timm route ok' in out and log == ['/mini-IIIS.pth']


@pytest.mark.slow
def test_transformers_route(tmp_path):
    """docs/transformers.md's route: a transformers model on an InLine backbone by name, the released weights loaded
    into it by ``inline_backbones.hf`` (a file in the released format), trained one step."""
    pytest.importorskip('transformers')
    out = run_without_openmmlab('''
        import timm
        import torch
        from transformers import TimmBackboneConfig, UperNetConfig, UperNetForSemanticSegmentation
        import inline_backbones
        from inline_backbones.hf import inline_backbones_in, load_released_backbone

        released = timm.create_model('inline_pvt_tiny')
        torch.save({'model': released.state_dict(), 'epoch': 299}, 'released.pth')
        backbone = TimmBackboneConfig(backbone='inline_pvt_tiny', out_indices=[0, 1, 2, 3])
        config = UperNetConfig(backbone_config=backbone, hidden_size=32, use_auxiliary_head=False, num_labels=3)
        model = UperNetForSemanticSegmentation(config)
        assert list(load_released_backbone(model, 'released.pth').values()) == ['released.pth']
        [ours] = inline_backbones_in(model).values()
        assert all(torch.equal(v, released.state_dict()[k]) for k, v in ours.state_dict().items())
        model.train()
        out = model(pixel_values=torch.randn(2, 3, 128, 128), labels=torch.randint(0, 3, (2, 128, 128)))
        out.loss.backward()
        assert torch.isfinite(out.loss) and out.logits.shape == (2, 3, 128, 128)
        print('transformers route ok')
    ''', tmp_path)
    assert 'transformers route ok' in out


@pytest.mark.slow
def test_tools_on_timm_names(tmp_path):
    """The attention analysis on an arch, the backbone benchmark on InLine and timm names and the ONNX export of a
    timm feature extractor, each tool's ``main`` as its command line runs it."""
    pytest.importorskip('matplotlib')
    out = run_without_openmmlab(f'''
        import os
        import runpy
        import cv2
        import numpy as np

        image = np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)
        cv2.imwrite('image.png', image)
        def tool(path, *args):
            sys.argv = [path, *args]
            try:
                runpy.run_path({str(ROOT)!r} + '/' + path, run_name='__main__')
            except SystemExit as exit:
                assert exit.code in (0, None), (path, exit.code)

        tool('tools/analysis_tools/analyze_attention.py', 'image.png', '--arch', 'tiny', '--size', '64', '64',
             '--num-queries', '8', '--num-pairs', '8', '--out-dir', 'attention')
        assert os.path.isfile('attention/attention_stats.json')
        tool('tools/analysis_tools/benchmark.py', '--models', 'inline-swin-t', 'timm:swin-t', '--sizes', '64x64',
             '--rounds', '1', '--warmup', '0', '--no-memory', '--no-flops', '--out-dir', 'benchmark')
        assert os.path.isfile('benchmark/results.json')
        tool('tools/deployment/export_onnx.py', 'inline_pvt_tiny', '--features', '--shape', '64', '64',
             '--repeats', '0', '--out', 'pvt.onnx')
        assert os.path.isfile('pvt.onnx')
        print('tools ok')
    ''', tmp_path)
    assert 'tools ok' in out
