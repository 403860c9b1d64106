"""Which OpenMMLab 2.0 line provides ``mmengine``, ``mmcv``, ``mmdet`` and ``mmseg`` in this environment.

Two lines install the same modules: the last official releases (``mmengine``, ``mmcv``, ``mmdet``,
``mmsegmentation``, ``openmim`` on PyPI) and the maintained fork (``onedl-mmengine``, ``onedl-mmcv``,
``onedl-mmdetection``, ``onedl-mmsegmentation``, ``onedl-mim``). A module is attributed to a line by the
distribution that installed it (``importlib.metadata.packages_distributions``); an environment where one
module comes from two distributions, or different modules from different lines, has files of one line
overwritten by the other, and :func:`check_one_line` says so with the fix.

``tools/misc/openmmlab_line.py`` prints the line and each module's distribution and version (:func:`describe`);
with ``--expect LINE`` it ends with the reason unless every module comes from that line (the set-up's last check).
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

# module -> distribution name, per line
LINES = {
    'official': {'mmengine': 'mmengine', 'mmcv': 'mmcv', 'mmdet': 'mmdet', 'mmseg': 'mmsegmentation',
                 'mim': 'openmim'},
    'onedl': {'mmengine': 'onedl-mmengine', 'mmcv': 'onedl-mmcv', 'mmdet': 'onedl-mmdetection',
              'mmseg': 'onedl-mmsegmentation', 'mim': 'onedl-mim'},
}
MODULES = ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mim')


class MixedLinesError(RuntimeError):
    """The OpenMMLab modules here come from more than one line (or none comes from a known one)."""


@dataclass(frozen=True)
class Provider:
    module: str
    line: str          # 'official', 'onedl', or '' when the distribution belongs to neither
    distribution: str
    version: str


def _normal(name: str) -> str:
    return name.lower().replace('_', '-')


def _line_of(module: str, dist: str) -> str:
    return next((line for line, dists in LINES.items() if dists[module] == _normal(dist)), '')


def providers() -> dict[str, list[Provider]]:
    """Every installed distribution that provides each of :data:`MODULES` (an empty list: not installed)."""
    by_module = metadata.packages_distributions()
    found: dict[str, list[Provider]] = {}
    for module in MODULES:
        dists = sorted({_normal(d) for d in by_module.get(module, [])})
        found[module] = [Provider(module, _line_of(module, d), d, metadata.version(d)) for d in dists]
    return found


def check_one_line(expect: str | None = None) -> str:
    """The one line that provides every installed OpenMMLab module; :class:`MixedLinesError` otherwise.

    ``expect``: also fail unless that line is the one (and mmengine, mmcv, mmdet, mmseg are all there).
    """
    if expect is not None and expect not in LINES:
        raise ValueError(f'unknown OpenMMLab line {expect!r}; the lines: {", ".join(LINES)}')
    found = providers()
    problems = []
    for module, provs in found.items():
        if len(provs) > 1:
            problems.append(f'{module} is installed by {" and ".join(p.distribution for p in provs)} '
                            '(the later install overwrote files of the other)')
        problems += [f'{module} comes from {p.distribution}, which is neither line\'s distribution'
                     for p in provs if not p.line]
    lines = sorted({p.line for provs in found.values() for p in provs if p.line})
    if len(lines) > 1:
        problems.append('modules of both lines: ' + ', '.join(
            f'{p.module} ({p.distribution})' for provs in found.values() for p in provs))
    line = lines[0] if len(lines) == 1 else ''
    if expect is not None:
        missing = [m for m in MODULES[:4] if not found[m]]
        if missing:
            problems.append(f'not installed: {", ".join(missing)}')
        if line and line != expect:
            problems.append(f'the modules come from the {line} line, not {expect}')
    if problems:
        raise MixedLinesError(
            'OpenMMLab here: ' + '; '.join(problems) + '. One environment holds one line '
            '(the same module names): make a fresh venv for the line you want (`STACK=official` or `STACK=onedl` '
            'with `make setup`), or uninstall one line\'s distributions and reinstall the other\'s.')
    return line


def describe() -> str:
    found = providers()
    line = check_one_line()
    parts = [f'{p.module} {p.version} ({p.distribution})' for provs in found.values() for p in provs]
    return f'OpenMMLab line: {line or "none installed"}' + (': ' + ', '.join(parts) if parts else '')


def mim_codebase(module: str) -> str:
    """The codebase name that ``mim train NAME`` / ``mim test NAME`` take for ``module`` (``'mmdet'``, ``'mmseg'``)
    with the installed line's mim: that line's distribution name (``mmdet`` / ``mmsegmentation``, or
    ``onedl-mmdetection`` / ``onedl-mmsegmentation``). The fork's mim resolves ``mmdet`` to no package: it reads a
    name as an abbreviation of the distributions it knows, and both ``onedl-mmdetection`` and ``mmdet3d`` contain it.
    """
    line = check_one_line()
    if not line:
        raise MixedLinesError('no OpenMMLab line is installed here (no mmengine, mmcv, mmdet, mmseg): `make setup` '
                              '(STACK=official or STACK=onedl) makes an environment with one')
    return LINES[line][module]
