"""Pointers in code, configs and the Makefile to the docs stay true: every ``docs/PAGE.md#anchor`` named in a comment
or docstring exists, nothing points to a README section (the README is a front page; its sections moved to docs/),
and the declared Python version is one the suite runs on. Planted stale pointers are caught."""
import re
import sys
from pathlib import Path

import tomllib
from helpers import anchors

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ['inline_backbones', 'tools', 'mmdet_configs', 'mmseg_configs', 'Makefile']
DOCS_POINTER = re.compile(r'\bdocs/([\w/-]+\.md)(?:#([\w-]+))?')
# "see README", "(README)", "the README's ..." about this repository's README (the authors' is LeapLabTHU/InLine's)
README_POINTER = re.compile(r'(?<!InLine )(?:\bsee (?:the )?README\b|\(README\)|\bREADME(?:\'s)? (?:section|"))')


def scanned_files(root):
    for name in SCANNED:
        path = root / name
        yield from ([path] if path.is_file() else sorted(p for p in path.rglob('*') if p.suffix in ('.py', '.sh')))


def stale_pointers(root):
    problems = []
    for path in scanned_files(root):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            where = f'{path.relative_to(root)}:{number}'
            for page, anchor in DOCS_POINTER.findall(line):
                target = root / 'docs' / page
                if not target.is_file():
                    problems.append(f'{where}: docs/{page} does not exist')
                elif anchor and anchor not in anchors(target):
                    problems.append(f'{where}: no heading with anchor #{anchor} in docs/{page}')
            if README_POINTER.search(line):
                problems.append(f'{where}: points to a README section; point to a docs/ page (and anchor) instead')
    return problems


def test_pointers_to_the_docs_exist():
    assert sum(1 for _ in scanned_files(ROOT)) > 50     # the scan sees the tree
    problems = stale_pointers(ROOT)
    assert not problems, 'stale pointers:\n' + '\n'.join(problems)


def test_planted_stale_pointers_are_found(tmp_path):
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'page.md').write_text('# Page\n\n## A section\n')
    (tmp_path / 'tools').mkdir()
    (tmp_path / 'tools' / 'tool.py').write_text(
        '"""See docs/page.md#a-section and docs/page.md."""\n'   # fine
        '# details: docs/page.md#gone\n'                          # a heading that is not there
        '# docs/missing.md\n'                                     # a page that is not there
        'x = 1  # the 3x value (README)\n'                        # a README section
        '"""as in the LeapLabTHU/InLine README"""\n')             # the authors' README: fine
    problems = stale_pointers(tmp_path)
    assert [p.split(': ', 1)[0] for p in problems] == ['tools/tool.py:2', 'tools/tool.py:3', 'tools/tool.py:4']


def test_declared_python_is_one_the_suite_runs_on():
    declared = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['requires-python']
    low = tuple(int(v) for v in re.fullmatch(r'>=\s*(\d+)\.(\d+)', declared).groups())
    assert low >= (3, 10), f'requires-python {declared!r}: the tests need Python 3.10 (zip(strict=True))'
    assert sys.version_info[:2] >= low


# Our own work tracking: a tracker's number after the word for a ticket, a numbered or named work period, a device
# loan. The words are kept apart from the patterns so that this file, scanned like any other, holds none of them.
# Upstream tickets keep their project's name before the word and are allowed.
_TICKET, _PERIOD, _LOAN = 'issue', 'session', 'lease'
TRACKING = re.compile(rf'(?<!mmsegmentation )(?<!mmdetection )(?<!mmengine )\b{_TICKET}s? #?\d+|\b(?:first|second|'
                      rf'third|next|same|this|one) {_PERIOD}\b|\bGPU {_LOAN}\b|\b(?:a|next|one|same) {_LOAN}\b', re.I)
TRACKED_TEXT = ['README.md', 'CITATION.cff', 'Makefile', 'docs', 'inline_backbones', 'tools', 'tests', 'mmdet_configs',
                'mmseg_configs']


def tracking_references(root):
    found = []
    for name in TRACKED_TEXT:
        path = root / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob('*') if p.suffix in ('.py', '.sh', '.md'))
        for file in files:
            for number, line in enumerate(file.read_text().splitlines(), 1):
                if TRACKING.search(line):
                    found.append(f'{file.relative_to(root)}:{number}: {line.strip()}')
    return found


def test_the_repository_speaks_of_itself_alone(tmp_path):
    """No work-tracking numbers or work periods in code, tests or docs: say what the thing is, the date and the
    machine. Planted references are found; upstream issues are not references of ours."""
    assert not tracking_references(ROOT), '\n'.join(tracking_references(ROOT))
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'page.md').write_text(
        f'Fixed ({_TICKET} 31, point 8).\n'                                 # ours
        f'See mmsegmentation {_TICKET}s 3734, 3831 for the loss.\n'        # upstream: fine
        f'Measured in the third {_PERIOD}.\n'                               # a work period
        f'Not run: no GPU {_LOAN} for it.\n'                                # a loan
        f'An onnxruntime {_PERIOD} with spinning off.\n')                   # the API's word: fine
    assert [f.split(': ', 1)[0] for f in tracking_references(tmp_path)] == ['docs/page.md:1', 'docs/page.md:3',
                                                                             'docs/page.md:4']
