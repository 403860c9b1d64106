"""``mmseg::`` / ``mmdet::`` config names on both OpenMMLab lines (:mod:`inline_backbones.openmmlab.config_scopes`):
the fork's mmengine looks ``mmseg::`` up as the distribution ``mmsegmentation``, which the fork calls
``onedl-mmsegmentation``. Simulated here on whichever line is installed by pointing mmengine's table at a missing
distribution, as the fork's table points at one."""
import ast
from pathlib import Path

import pytest
from mmengine.config import Config
from mmengine.config.utils import MODULE2PACKAGE

from inline_backbones.openmmlab import config_scopes
from inline_backbones.openmmlab.line import LINES, check_one_line

ROOT = Path(__file__).resolve().parents[1]
SCOPES_BASE = './_base_/openmmlab_scopes.py'


def _bases(path):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == '_base_' for t in node.targets):
            value = ast.literal_eval(node.value)
            return [value] if isinstance(value, str) else list(value)
    return []


def test_the_installed_line_resolves_both_scopes():
    line = check_one_line()
    for scope in config_scopes.SCOPES:
        assert config_scopes._installed(MODULE2PACKAGE[scope]), scope
    # nothing is remapped where mmengine's table already resolves (the official line's names)
    assert MODULE2PACKAGE['mmseg'] == ('mmsegmentation' if line == 'official' else LINES[line]['mmseg'])


def test_a_scope_the_table_cannot_resolve_is_pointed_at_the_installed_distribution(monkeypatch):
    line = check_one_line()
    monkeypatch.setitem(MODULE2PACKAGE, 'mmseg', 'mmsegmentation-not-installed')
    monkeypatch.setitem(MODULE2PACKAGE, 'mmdet', 'mmdet')
    assert config_scopes.resolve() == {'mmseg': LINES[line]['mmseg']}
    assert MODULE2PACKAGE['mmseg'] == LINES[line]['mmseg'] and MODULE2PACKAGE['mmdet'] == 'mmdet'
    assert config_scopes.resolve() == {}                           # resolved: nothing more to do


@pytest.mark.parametrize('config', ['inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',
                                    'fpn_inline-pvt-s_8xb2-40k_ade20k-512x512.py'])
def test_a_config_read_before_the_package_resolves_mmseg_names_through_its_first_base(monkeypatch, config):
    """What ``mim train mmseg`` does on the fork: mmseg's own train.py reads the config with the fork's table (here:
    a table naming a missing distribution) before anything imports this package. The first base fixes the table."""
    monkeypatch.setitem(MODULE2PACKAGE, 'mmseg', 'mmsegmentation-not-installed')
    cfg = Config.fromfile(str(ROOT / 'mmseg_configs' / config))
    assert cfg.model.backbone.type.startswith('inline_backbones.')
    assert MODULE2PACKAGE['mmseg'] == LINES[check_one_line()]['mmseg']
    assert not dict(Config.fromfile(str(ROOT / 'mmseg_configs' / SCOPES_BASE)))   # the base adds no key


def test_the_same_read_fails_without_the_base(monkeypatch, tmp_path):
    """The failure the first base prevents (so the test above proves something)."""
    child = tmp_path / 'child.py'
    child.write_text("_base_ = 'mmseg::sem_fpn/fpn_r50_4xb4-160k_ade20k-512x512.py'\n")
    monkeypatch.setitem(MODULE2PACKAGE, 'mmseg', 'mmsegmentation-not-installed')
    with pytest.raises(ModuleNotFoundError, match='mmsegmentation-not-installed is not installed'):
        Config.fromfile(str(child))


def test_every_config_inheriting_an_mmseg_name_reads_the_scopes_base_first():
    for folder in ('mmseg_configs', 'mmdet_configs'):
        for path in sorted((ROOT / folder).glob('*.py')):
            bases = _bases(path)
            if any(b.startswith('mmseg::') for b in bases):
                assert bases[0] == SCOPES_BASE, f'{path.name}: _base_ = {bases}'


def test_a_recipe_child_of_an_mmseg_recipe_reads_the_scopes_base_first(monkeypatch, tmp_path):
    """tools/misc/inline_recipe.py's child of an ``mmseg::`` recipe also loads where the table names a missing
    distribution; a child of an ``mmdet::`` recipe names its recipe alone."""
    from inline_backbones.openmmlab.upstream_recipe import SCOPES_BASE as absolute_base
    from inline_backbones.openmmlab.upstream_recipe import plan, write

    assert Path(absolute_base) == ROOT / 'mmseg_configs' / SCOPES_BASE
    seg = write(plan('mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'),
                str(tmp_path / 'seg.py'))
    assert _bases(Path(seg))[0] == absolute_base
    det = write(plan('mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py'), str(tmp_path / 'det.py'))
    assert _bases(Path(det)) == ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py']
    monkeypatch.setitem(MODULE2PACKAGE, 'mmseg', 'mmsegmentation-not-installed')
    assert Config.fromfile(seg).model.backbone.type == 'inline_backbones.InLineSwinTransformer'
