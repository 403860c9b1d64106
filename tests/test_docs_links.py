"""README.md and docs/ point only at things that exist.

* every relative link and image (markdown ``[..](..)`` / ``![..](..)``, reference definitions, HTML ``src``/``href``)
  names a file or folder inside the repository, and an ``#anchor`` names a heading of its page (GitHub's rule);
* every repository path named in a command block or a code span (configs, tools, package modules, tests, docs;
  shell brace lists expanded) exists, and every ``make TARGET`` is a target of the Makefile.

The checker takes the repository root, so the tests below also run it on planted broken trees.
"""
import re
import subprocess
from pathlib import Path

import pytest
from helpers import anchors, slug, split_fences

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ('mmdet_configs', 'mmseg_configs', 'tools', 'demo', 'inline_backbones', 'tests', 'docs', '.ci')
CONFIG_DIRS = ('mmdet_configs', 'mmseg_configs')
COMMAND_FENCES = {'bash', 'sh', 'shell', 'console'}
INLINE_LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
REFERENCE_DEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$', re.M)
HTML_ATTR = re.compile(r'<(?:img|a)\b[^>]*?\b(?:src|href)\s*=\s*"([^"]*)"', re.I)
CODE_SPAN = re.compile(r'(`+)(.+?)\1', re.S)
_DIRS = '|'.join(re.escape(d) for d in SOURCE_DIRS)
REPO_PATH = re.compile(rf'(?<![\w./-])(?:\./)?((?:{_DIRS})/[\w./{{}},*-]*\w)')
MAKE_TARGET = re.compile(r'(?:^|[;&|(]\s*)make\s+(?:-C\s+\S+\s+)?(?:\w+=\S+\s+)*([A-Za-z][\w-]*)')
# A config named without its folder (tables list them so): ours name the model `inline-swin-t`, `inline-pvt-s`, ...
BARE_CONFIG = re.compile(r'^[\w.{},-]*inline-[\w.{},-]*\.py$')
PLACEHOLDER = re.compile(r'\.\.\.')          # `mmdet_configs/...`: an elided name


def markdown_files(root):
    """README.md and every page under docs/."""
    return [p for p in [root / 'README.md', *sorted((root / 'docs').rglob('*.md'))] if p.is_file()]


def expand_braces(text):
    """Shell brace expansion of ``a{b,c}d`` (nested lists expanded left to right)."""
    match = re.search(r'\{([^{}]*,[^{}]*)\}', text)
    if not match:
        return [text]
    return [out for option in match.group(1).split(',')
            for out in expand_braces(text[:match.start()] + option + text[match.end():])]


def published(root):
    """Paths git publishes (tracked, or new and not ignored) and their folders; None unless ``root`` is the top of a
    git checkout (a copy inside another checkout, as mutmut's ``mutants/``, says nothing about publishing)."""
    git = ['git', '-C', str(root)]
    try:
        top = subprocess.run(git + ['rev-parse', '--show-toplevel'], capture_output=True, check=True, text=True)
        if Path(top.stdout.strip()).resolve() != Path(root).resolve():
            return None
        out = subprocess.run(git + ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                             capture_output=True, check=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = [Path(f) for f in out.split('\0') if f]
    return {root.resolve() / p for f in files for p in (f, *f.parents)}


def check_link(root, page, target, where, public=None):
    """Problems with one link target written in ``page`` (none for external links); ``public``: what git publishes
    (a file that exists here but is ignored by git is as dead on GitHub as a missing one)."""
    if not target or re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):          # http:, https:, mailto:, ...
        return []
    path_part, _, anchor = target.partition('#')
    resolved = (page.parent / path_part).resolve() if path_part else page
    if root.resolve() not in (resolved, *resolved.parents):
        return [f'{where}: link {target!r} leaves the repository']
    if not resolved.exists():
        return [f'{where}: link {target!r}: {resolved.relative_to(root.resolve())} does not exist']
    if public is not None and resolved not in public:
        return [f'{where}: link {target!r}: {resolved.relative_to(root.resolve())} is ignored by git']
    if anchor and resolved.suffix == '.md' and anchor not in anchors(resolved):
        return [f'{where}: link {target!r}: no heading with anchor #{anchor} in {resolved.name}']
    return []


def check_paths(root, text, where):
    """Problems with the repository paths named in ``text`` (a command line or a code span)."""
    problems = []
    for match in REPO_PATH.finditer(text):
        name = match.group(1).rstrip('.,')
        if PLACEHOLDER.search(name):
            continue
        for path in expand_braces(name):
            exists = any(root.glob(path)) if '*' in path else (root / path).exists()
            if not exists:
                problems.append(f'{where}: {path} does not exist')
    return problems


def makefile_targets(root):
    makefile = root / 'Makefile'
    text = makefile.read_text() if makefile.is_file() else ''
    return set(re.findall(r'^([A-Za-z][\w-]*)\s*:(?!=)', text, re.M))


def check_docs(root):
    """Every problem of the repository's markdown, as ``file:line: what``."""
    root = Path(root)
    targets, public = makefile_targets(root), published(root)

    def bad_make(text, where):
        return [f'{where}: make target {t!r} is not in the Makefile' for t in MAKE_TARGET.findall(text)
                if t not in targets]

    problems = []
    for page in markdown_files(root):
        name = page.relative_to(root)
        prose_lines = []
        for number, line, lang, fenced in split_fences(page.read_text()):
            if fenced and (lang in COMMAND_FENCES or lang == ''):
                command = line.split(' #')[0] if lang else line           # shell comments are not commands
                problems += check_paths(root, command, f'{name}:{number}') + bad_make(command, f'{name}:{number}')
            prose_lines.append((number, '' if fenced else line))
        # Prose: code spans may run over a line break, so search the whole text and count lines back.
        text = '\n'.join(line for _, line in prose_lines)
        numbers = [number for number, _ in prose_lines]
        for span in CODE_SPAN.finditer(text):
            where = f'{name}:{numbers[text.count(chr(10), 0, span.start())]}'
            problems += check_paths(root, span.group(2), where) + bad_make(span.group(2), where)
            if BARE_CONFIG.match(span.group(2)):
                problems += [f'{where}: config {config} is in neither mmdet_configs/ nor mmseg_configs/'
                             for config in expand_braces(span.group(2))
                             if not any((root / folder / config).is_file() for folder in CONFIG_DIRS)]
        outside_code = CODE_SPAN.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text)
        for pattern in (INLINE_LINK, HTML_ATTR, REFERENCE_DEF):
            for match in pattern.finditer(outside_code):
                where = f'{name}:{numbers[outside_code.count(chr(10), 0, match.start())]}'
                problems += check_link(root, page, match.group(1), where, public)
    return sorted(set(problems), key=problems.index)


def test_readme_and_docs_point_only_at_what_exists():
    assert (ROOT / 'README.md').is_file() and len(markdown_files(ROOT)) > 10    # nothing to check passes nothing
    problems = check_docs(ROOT)
    assert not problems, 'broken references in README.md / docs/:\n' + '\n'.join(problems)


def test_every_docs_page_is_reachable_from_the_readme():
    """A page nobody links to is a page nobody reads: every docs/*.md is linked from README.md or another page."""
    linked = set()
    for page in markdown_files(ROOT):
        text = '\n'.join('' if fenced else line for _, line, _, fenced in split_fences(page.read_text()))
        for match in INLINE_LINK.finditer(CODE_SPAN.sub(' ', text)):
            path = match.group(1).partition('#')[0]
            if path and '://' not in path:
                linked.add((page.parent / path).resolve())
    orphans = [p.relative_to(ROOT) for p in markdown_files(ROOT)[1:] if p.resolve() not in linked]
    assert not orphans, f'docs pages linked from nowhere: {orphans}'


# ---- the checker itself, on planted trees --------------------------------------------------------------------

GOOD_README = """# Title

## Models and checkpoints

See [the docs](docs/page.md#second-section), [models](#models-and-checkpoints), ![plot](docs/plot.png),
[site](https://example.org/x.md) and <img src="docs/plot.png">. In code: `[not a link](missing.md)`,
`mmdet_configs/a_{t,s}.py`, `tools/run.py` and `a_inline-t.py`.

```bash
python tools/run.py mmdet_configs/a_t.py --checkpoint CKPT    # placeholders are not paths
make test
```

```python
print('[not a link](missing.md)')
```
"""

GOOD_PAGE = """# Page

## Second section

Back to the [README](../README.md).
"""


def plant(tmp_path, readme=GOOD_README, page=GOOD_PAGE):
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'mmdet_configs').mkdir()
    (tmp_path / 'tools').mkdir()
    (tmp_path / 'mmseg_configs').mkdir()
    for name in ('mmdet_configs/a_t.py', 'mmdet_configs/a_s.py', 'mmseg_configs/a_inline-t.py', 'tools/run.py',
                 'docs/plot.png'):
        (tmp_path / name).write_text('x')
    (tmp_path / 'Makefile').write_text('VENV ?= .venv\n\ntest: setup\n\tpytest\n\nsetup:\n\ttrue\n')
    (tmp_path / 'README.md').write_text(readme)
    (tmp_path / 'docs' / 'page.md').write_text(page)
    return tmp_path


def test_checker_passes_a_correct_tree(tmp_path):
    assert check_docs(plant(tmp_path)) == []


@pytest.mark.parametrize('broken, expected', [
    ('[gone](docs/gone.md)', 'README.md:5: link \'docs/gone.md\': docs/gone.md does not exist'),
    ('![img](docs/missing.png)', 'docs/missing.png does not exist'),
    ('[bad anchor](docs/page.md#third-section)', 'no heading with anchor #third-section in page.md'),
    ('[own bad anchor](#model)', 'no heading with anchor #model in README.md'),
    ('[outside](../shared/fixtures/README.md)', "link '../shared/fixtures/README.md' leaves the repository"),
    ('<img src="docs/nothing.png">', 'docs/nothing.png does not exist'),
    ('`inline_backbones/models/gone.py`', 'README.md:5: inline_backbones/models/gone.py does not exist'),
    ('`mmdet_configs/a_{t,s,m}.py`', 'mmdet_configs/a_m.py does not exist'),
    ('`make demo`', "make target 'demo' is not in the Makefile"),
    ('`a_inline-{t,m}.py`', 'config a_inline-m.py is in neither mmdet_configs/ nor mmseg_configs/'),
])
def test_checker_reports_a_broken_reference(tmp_path, broken, expected):
    readme = GOOD_README.replace('See [the docs]', broken + ' See [the docs]')
    problems = check_docs(plant(tmp_path, readme=readme))
    assert len(problems) == 1 and expected in problems[0], problems


@pytest.mark.parametrize('command, expected', [
    ('python tools/gone.py mmdet_configs/a_t.py', 'README.md:10: tools/gone.py does not exist'),
    ('mim train mmdet mmdet_configs/b_{t,s}.py', 'mmdet_configs/b_t.py does not exist'),
    ('make -C repo lint', "README.md:10: make target 'lint' is not in the Makefile"),
])
def test_checker_reports_a_broken_command(tmp_path, command, expected):
    readme = GOOD_README.replace('python tools/run.py mmdet_configs/a_t.py --checkpoint CKPT', command)
    problems = check_docs(plant(tmp_path, readme=readme))
    assert problems and expected in problems[0], problems


def test_checker_reports_a_link_to_a_file_git_ignores(tmp_path):
    plant(tmp_path)
    (tmp_path / '.gitignore').write_text('outputs/\n')
    (tmp_path / 'outputs').mkdir()
    (tmp_path / 'outputs' / 'plot.png').write_text('x')
    subprocess.run(['git', 'init', '-q', str(tmp_path)], check=True)
    assert check_docs(tmp_path) == []
    (tmp_path / 'README.md').write_text(GOOD_README + '\n![result](outputs/plot.png)\n')
    assert check_docs(tmp_path) == ["README.md:18: link 'outputs/plot.png': outputs/plot.png is ignored by git"]


def test_checker_reads_links_in_other_pages_relative_to_the_page(tmp_path):
    problems = check_docs(plant(tmp_path, page=GOOD_PAGE.replace('../README.md', 'README.md')))
    assert problems == ["docs/page.md:5: link 'README.md': docs/README.md does not exist"]


def test_slugs_follow_githubs_rule():
    assert slug('Reproducing the ImageNet-1k top-1 (val, 224)') == 'reproducing-the-imagenet-1k-top-1-val-224'
    assert slug("Window-size sweep (the paper's Fig. 3)") == 'window-size-sweep-the-papers-fig-3'
    assert slug('Windowed InLine: `inline_window_size`') == 'windowed-inline-inline_window_size'
    assert expand_braces('a_{t,s}_{1,2}.py') == ['a_t_1.py', 'a_t_2.py', 'a_s_1.py', 'a_s_2.py']
