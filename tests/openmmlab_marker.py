"""Which test modules touch OpenMMLab, for the ``openmmlab`` marker (added by conftest.py at collection).

Each OpenMMLab line (``STACK=official|onedl``) runs the whole suite on the default line and, on the other,
``-m openmmlab``: every test module that touches mmengine, mmcv, mmdet, mmseg or mim. Decided from the code, not
from a list: a module touches OpenMMLab when

* its source imports one of those packages (at any level, inside functions too), or names a script of ``tools/``
  or ``demo/`` whose source does (the tests run them as subprocesses or load them with ``tool_modules``), or
* its source names one of them in a string (``pytest.importorskip('mmdet.models...')``, ``'mmdet::swin/...'``), or
* a name it imports from this package (a class, function or module of ``inline_backbones``) is defined in a module
  whose source imports one of them (e.g. the registry, the OpenMMLab edge, the task tools; the package's strings,
  such as the error naming the extras, do not count), or is a class with such a base, or
* a helper module of ``tests/`` it imports touches OpenMMLab by these rules (conftest.py, which every test runs
  under, is not counted: its references live in torch alone).

What is left (the InLine attention and mixers' math, the timm-only paths, the kernels, the docs checks) runs on the
default line only.
"""
import ast
import functools
import itertools
import re
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / 'tests'
PACKAGE = ROOT / 'inline_backbones'
OPENMMLAB = frozenset({'mmengine', 'mmcv', 'mmdet', 'mmseg', 'mim'})
_SCRIPT = re.compile(r'\b((?:tools|demo)/[\w/.-]+\.py)\b')
_NAMED = re.compile(r'^(?:mmengine|mmcv|mmdet|mmseg)(?:\.|::|$)')


@functools.cache
def _source_imports_openmmlab(path: Path, _visiting: frozenset = frozenset(), strings: bool = True) -> bool:
    """Whether the file at ``path`` imports an OpenMMLab package anywhere, or (``strings``) names one or a script
    that does."""
    _visiting = _visiting | {path}
    tree = ast.parse(path.read_text(encoding='utf-8'))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(alias.name.split('.')[0] in OPENMMLAB for alias in node.names):
                return True
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.split('.')[0] in OPENMMLAB:
                return True
        elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _NAMED.match(node.value):
                return True
            for script in {ROOT / name for name in _SCRIPT.findall(node.value)} - _visiting:
                if script.is_file() and _source_imports_openmmlab(script, _visiting):
                    return True
        elif strings and isinstance(node, ast.List) and _runs_mim(node):
            return True
    return False


def _runs_mim(node: ast.List) -> bool:
    """A command list such as ``['mim', 'train', ...]`` or ``[..., '-m', 'mim', ...]``."""
    words = [elt.value for elt in node.elts if isinstance(elt, ast.Constant) and isinstance(elt.value, str)]
    return bool(words) and (words[0] == 'mim' or any(pair == ('-m', 'mim') for pair in itertools.pairwise(words)))


def _defining_modules(obj) -> list[types.ModuleType]:
    """The module ``obj`` is (a module) or was defined in (a function), or those of a class and its bases."""
    if isinstance(obj, types.ModuleType):
        return [obj]
    if isinstance(obj, type):
        names = [cls.__module__ for cls in obj.__mro__]
    elif isinstance(obj, types.FunctionType):
        names = [obj.__module__]
    else:
        return []
    return [sys.modules[name] for name in dict.fromkeys(names) if name in sys.modules]


def touches_openmmlab(module: types.ModuleType, _seen: frozenset = frozenset()) -> bool:
    """Whether the test (or tests/ helper) ``module`` touches OpenMMLab by the rules of this file's docstring."""
    path = Path(module.__file__).resolve()
    if _source_imports_openmmlab(path):
        return True
    seen = _seen | {path}
    for value in vars(module).values():
        for defining in _defining_modules(value):
            if defining.__name__.split('.')[0] in OPENMMLAB:
                return True
            file = getattr(defining, '__file__', None)
            if file is None or Path(file).resolve() in seen:
                continue
            file = Path(file).resolve()
            if file.is_relative_to(PACKAGE) and _source_imports_openmmlab(file, strings=False):
                return True
            if file.parent == TESTS and file.name != 'conftest.py' and touches_openmmlab(defining, seen):
                return True
    return False


_HELPER_IMPORT = re.compile(r'^(?:from|import)\s+(\w+)', re.MULTILINE)


@functools.cache
def source_touches_openmmlab(path: Path) -> bool:
    """Whether a test module's source, or the source of a ``tests/`` helper it imports (by these rules, read, not
    imported), names OpenMMLab: what decides, before importing it, that a module cannot even be collected without a
    line."""
    if _source_imports_openmmlab(path):
        return True
    helpers = {TESTS / f'{name}.py' for name in _HELPER_IMPORT.findall(path.read_text(encoding='utf-8'))}
    return any(helper.is_file() and helper != path and source_touches_openmmlab(helper) for helper in helpers)
