"""The two OpenMMLab lines: which one this environment holds (:mod:`inline_backbones.openmmlab.line`), that a
mixed environment is named as such, and that the set-up's pins, the package's extras and the line table agree."""
import re
import sys
from pathlib import Path

import pytest
import tomllib
from tool_modules import load_tool

from inline_backbones.cli import run_tool
from inline_backbones.openmmlab import line as ol

ROOT = Path(__file__).resolve().parents[1]


def _fake_metadata(monkeypatch, by_module, versions=None):
    monkeypatch.setattr(ol.metadata, 'packages_distributions', lambda: by_module)
    monkeypatch.setattr(ol.metadata, 'version', lambda dist: (versions or {}).get(dist, '1.0'))


def test_this_environment_holds_one_line_and_its_venv_says_which():
    line = ol.check_one_line()
    assert line in ol.LINES
    found = ol.providers()
    assert [p.distribution for p in found['mmdet']] == [ol.LINES[line]['mmdet']]
    stamp = Path(sys.prefix) / '.inline_stack'
    if stamp.exists():                                   # made by tools/setup/setup_env.sh
        assert stamp.read_text().strip() == line
    assert ol.check_one_line(expect=line) == line
    other = next(name for name in ol.LINES if name != line)
    with pytest.raises(ol.MixedLinesError, match=f'the modules come from the {line} line, not {other}'):
        ol.check_one_line(expect=other)


@pytest.mark.parametrize('line', sorted(ol.LINES))
def test_a_whole_line_is_that_line(monkeypatch, line):
    _fake_metadata(monkeypatch, {module: [dist] for module, dist in ol.LINES[line].items()})
    assert ol.check_one_line(expect=line) == line
    assert ol.describe().startswith(f'OpenMMLab line: {line}: mmengine 1.0 ({ol.LINES[line]["mmengine"]})')


def test_the_fork_over_the_official_line_is_refused_with_the_fix(monkeypatch):
    """pip installs onedl-mmcv over mmcv without complaint (other distribution names): both claim mmcv."""
    official = ol.LINES['official']
    _fake_metadata(monkeypatch, {**{m: [d] for m, d in official.items()}, 'mmcv': ['mmcv', 'onedl_mmcv']})
    with pytest.raises(ol.MixedLinesError) as err:
        ol.check_one_line()
    message = str(err.value)
    assert 'mmcv is installed by mmcv and onedl-mmcv' in message
    assert 'modules of both lines' in message and 'STACK=official' in message and 'STACK=onedl' in message


def test_modules_of_different_lines_are_refused(monkeypatch):
    _fake_metadata(monkeypatch, {'mmengine': ['onedl-mmengine'], 'mmcv': ['mmcv'], 'mmdet': ['mmdet'],
                                 'mmseg': ['mmsegmentation']})
    with pytest.raises(ol.MixedLinesError, match=r'modules of both lines: mmengine \(onedl-mmengine\), mmcv \(mmcv\)'):
        ol.check_one_line()


def test_an_unknown_distribution_and_a_missing_module(monkeypatch):
    _fake_metadata(monkeypatch, {'mmengine': ['mmengine'], 'mmcv': ['mmcv-lite'], 'mmdet': ['mmdet']})
    with pytest.raises(ol.MixedLinesError) as err:
        ol.check_one_line(expect='official')
    assert "mmcv comes from mmcv-lite, which is neither line's distribution" in str(err.value)
    assert 'not installed: mmseg' in str(err.value)
    _fake_metadata(monkeypatch, {})
    assert ol.check_one_line() == '' and ol.describe() == 'OpenMMLab line: none installed'
    with pytest.raises(ValueError, match='unknown OpenMMLab line'):
        ol.check_one_line(expect='nightly')


def test_the_command_line_reports_and_checks(capsys):
    """tools/misc/openmmlab_line.py (the set-up's last check): the line, or one error line naming the mix."""
    tool = load_tool('tools/misc/openmmlab_line.py')
    line = ol.check_one_line()
    run_tool(tool.main, 'openmmlab_line', [])
    assert capsys.readouterr().out.startswith(f'OpenMMLab line: {line}: ')
    other = next(name for name in ol.LINES if name != line)
    with pytest.raises(SystemExit) as exit_:           # SystemExit(message): the line on stderr, exit status 1
        run_tool(tool.main, 'openmmlab_line', ['--expect', other])
    message = str(exit_.value.code)
    assert message.startswith(f'[openmmlab_line] error: OpenMMLab here: the modules come from the {line} line, '
                              f'not {other}')
    assert len(message.splitlines()) == 1


def _pins(path):
    return dict(re.match(r'^([A-Za-z0-9_.-]+)==(\S+)$', line).groups()
                for line in path.read_text().splitlines() if line and not line.startswith('#'))


@pytest.mark.parametrize('line', sorted(ol.LINES))
def test_pins_extras_and_table_name_the_same_distributions(line):
    """requirements/<line>.txt pins exactly the line's five distributions; the package's extra of that name asks
    for the same four libraries (mim is a tool, not a dependency); no plain dependency names either line."""
    pins = _pins(ROOT / 'requirements' / f'{line}.txt')
    assert set(pins) == set(ol.LINES[line].values())
    project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
    extra = {re.match(r'[A-Za-z0-9_.-]+', req).group() for req in project['optional-dependencies'][line]}
    assert extra == {dist for module, dist in ol.LINES[line].items() if module != 'mim'}
    every_dist = {dist for dists in ol.LINES.values() for dist in dists.values()}
    plain = {re.match(r'[A-Za-z0-9_.-]+', req).group() for req in project['dependencies']}
    assert not plain & every_dist, 'a plain dependency would install one line over the other'
    common = (ROOT / 'requirements.txt').read_text()
    assert not any(re.search(rf'^{re.escape(dist)}==', common, re.M) for dist in every_dist)


def test_mim_takes_the_lines_distribution_name_for_each_codebase(monkeypatch):
    """The name ``mim train NAME`` takes: the installed line's distribution (`mmdet` is no unique package to the
    fork's mim); the mim here resolves it to a codebase with its own ``module_full_name``."""
    from mim.utils import module_full_name

    for module in ('mmdet', 'mmseg'):
        name = ol.mim_codebase(module)
        assert name == ol.LINES[ol.check_one_line()][module]
        assert module_full_name(name) == name
    for dists in ol.LINES.values():
        _fake_metadata(monkeypatch, {module: [dist] for module, dist in dists.items()})
        assert (ol.mim_codebase('mmdet'), ol.mim_codebase('mmseg')) == (dists['mmdet'], dists['mmseg'])
    _fake_metadata(monkeypatch, {})
    with pytest.raises(ol.MixedLinesError, match='no OpenMMLab line is installed here'):
        ol.mim_codebase('mmdet')
