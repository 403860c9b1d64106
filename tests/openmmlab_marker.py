"""Which tests touch OpenMMLab, for the ``openmmlab`` marker (added by conftest.py at collection).

Each OpenMMLab line (``STACK=official|onedl``) runs the whole suite on the default line and, on the other,
``-m openmmlab``: every test that touches mmengine, mmcv, mmdet, mmseg or mim; the environment without OpenMMLab
(``make test-core``) runs the others. Decided per test from the code, not from a list: a test touches OpenMMLab when

* its module's level (the statements outside functions and classes) imports or names one of those packages, or
  imports a value of one (a class with such a base included), or
* what the test reaches does: its own function or class (decorators, so ``parametrize`` values, included), and,
  followed transitively, the module's functions, classes and fixtures it names (an argument names a fixture) and
  the values it names that the module imported. Reached code touches OpenMMLab when its source imports one of
  those packages (at any level, inside functions too; also a module of this package that does), names one in a
  string (``pytest.importorskip('mmdet.models...')``, ``'mmdet::swin/...'``), names a script of ``tools/`` or
  ``demo/`` whose source does (the tests run them as subprocesses or load them with ``tool_modules``), or runs mim;
  a value touches it when it is defined in a module of this package whose source imports one (e.g. the registry,
  the OpenMMLab edge, the task tools; the package's strings, such as the error naming the extras, do not count),
  or is a ``tests/`` helper that reaches it (conftest.py, which every test runs under, is not counted: its
  references live in torch alone).

A test module that cannot even be imported without a line (:func:`cannot_import_without_openmmlab`) is not collected
in the environment without OpenMMLab.
"""
import ast
import functools
import importlib
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
_NAMED = re.compile(r'^(?:mmengine|mmcv|mmdet|mmseg)(?:\.|::?|$)')   # also the benchmark's 'mmdet:swin-t'


@functools.cache
def _source_imports_openmmlab(path: Path, _visiting: frozenset = frozenset(), strings: bool = True) -> bool:
    """Whether the file at ``path`` imports an OpenMMLab package anywhere, or (``strings``) names one or a script
    that does."""
    return _nodes_touch(ast.walk(_tree(path)), _visiting | {path}, strings)


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding='utf-8'))


def _nodes_touch(nodes, _visiting: frozenset = frozenset(), strings: bool = True) -> bool:
    """Whether any of ``nodes`` imports OpenMMLab or (``strings``) names it, a script that does, or runs mim."""
    for node in nodes:
        if isinstance(node, ast.Import):
            if any(alias.name.split('.')[0] in OPENMMLAB for alias in node.names):
                return True
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.split('.')[0] in OPENMMLAB:
                return True
            if node.level == 0 and node.module and node.module.split('.')[0] == PACKAGE.name:
                if _package_names_touch(node.module, [alias.name for alias in node.names]):
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
    else:                                   # an instance (e.g. a registry): its class's
        names = [cls.__module__ for cls in type(obj).__mro__]
    return [sys.modules[name] for name in dict.fromkeys(names) if name in sys.modules]


def _package_names_touch(module_name: str, names) -> bool:
    """Whether ``from module_name import names`` (a module of this package) touches OpenMMLab: the module's source
    imports it, or a name is a value that does (:func:`_value_touches`), or needs a line to be given at all (an
    OpenMMLab name the package resolves at use, where none is installed)."""
    file = _package_file(module_name)
    if file is not None and _source_imports_openmmlab(file, strings=False):
        return True
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return True
    for name in names:
        try:
            value = getattr(module, name)
        except (ImportError, AttributeError):
            return True
        if _value_touches(value, frozenset()):
            return True
    return False


def _package_file(name: str) -> Path | None:
    """The source file of the package's module ``name`` (``inline_backbones.x.y``), if there is one."""
    base = ROOT.joinpath(*name.split('.'))
    return next((p for p in (base.with_suffix('.py'), base / '__init__.py') if p.is_file()), None)


def _top_statements(path: Path) -> list:
    """The module-level statements of the file at ``path``, without the bodies of its functions and classes."""
    return [n for n in _tree(path).body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


@functools.cache
def cannot_import_without_openmmlab(path: Path) -> bool:
    """Whether the module at ``path`` (a test module or a helper) fails to import without a line: its module-level
    statements import OpenMMLab, or a module of the package or a ``tests/`` helper whose module level does (read,
    not imported), or they touch OpenMMLab otherwise (:func:`_nodes_touch`: then every test of the module is marked
    anyway). Such test modules are not collected where no line is installed."""
    if _nodes_touch((sub for node in _top_statements(path) for sub in ast.walk(node)), frozenset({path})):
        return True
    for node in _top_statements(path):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                names = [alias.name for alias in sub.names]
            elif isinstance(sub, ast.ImportFrom) and sub.level == 0 and sub.module:
                names = [sub.module]
            else:
                continue
            for name in names:
                top = name.split('.')[0]
                if top in OPENMMLAB:
                    return True
                file = _package_file(name) if top == PACKAGE.name else TESTS / f'{top}.py'
                if file is not None and file.is_file() and file != path and cannot_import_without_openmmlab(file):
                    return True
    return False


def _value_touches(value, seen: frozenset) -> bool:
    """Whether a value a module imported touches OpenMMLab: it is of an OpenMMLab module (a class with such a base
    included), defined in a module of the package whose source imports OpenMMLab, or a ``tests/`` helper that
    reaches it (a helper function: what it reaches; a helper module: any of it)."""
    for defining in _defining_modules(value):
        if defining.__name__.split('.')[0] in OPENMMLAB:
            return True
        file = getattr(defining, '__file__', None)
        if file is None:
            continue
        file = Path(file).resolve()
        if file.is_relative_to(PACKAGE) and _source_imports_openmmlab(file, strings=False):
            return True
        if file.parent == TESTS and file.name != 'conftest.py' and (defining.__name__, None) not in seen:
            if isinstance(value, types.FunctionType) and value.__module__ == defining.__name__:
                if _reaches(defining, frozenset({value.__name__}), seen):
                    return True
            elif isinstance(value, types.ModuleType) and touches_openmmlab(value, seen):
                return True
    return False


def _reaches(module: types.ModuleType, roots: frozenset, seen: frozenset) -> bool:
    """Whether the module-level definitions ``roots`` of the test or helper ``module`` touch OpenMMLab: their own
    source (decorators included), the module's functions, classes and fixtures they name (arguments name fixtures),
    and the imported values they name, followed transitively."""
    path = Path(module.__file__).resolve()
    if _module_level_touches(module, seen):
        return True
    defs = {n.name: n for n in _tree(path).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    todo, done = list(roots), set()
    while todo:
        name = todo.pop()
        if name in done or (module.__name__, name) in seen:
            continue
        done.add(name)
        node = defs.get(name)
        if node is None:
            value = vars(module).get(name)
            if value is not None and _value_touches(value, seen | {(module.__name__, name)}):
                return True
            continue
        if _nodes_touch(ast.walk(node), frozenset({path})):
            return True
        for sub in ast.walk(node):      # ``package.NAME`` of a module of this package the module imported
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
                value = vars(module).get(sub.value.id)
                if isinstance(value, types.ModuleType) and value.__name__.split('.')[0] == PACKAGE.name:
                    if _package_names_touch(value.__name__, [sub.attr]):
                        return True
        named = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        named |= {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        todo.extend(named - done)
    return False


def _module_level_touches(module: types.ModuleType, seen: frozenset) -> bool:
    """Whether the module-level statements of ``module`` (not its functions' and classes' bodies) touch OpenMMLab:
    they import or name it, or import a value of an OpenMMLab module (a class with such a base included)."""
    path = Path(module.__file__).resolve()
    if _nodes_touch((sub for node in _top_statements(path) for sub in ast.walk(node)), frozenset({path})):
        return True
    for value in vars(module).values():
        if any(d.__name__.split('.')[0] in OPENMMLAB for d in _defining_modules(value)):
            return True
    return False


def touches_openmmlab(module: types.ModuleType, _seen: frozenset = frozenset()) -> bool:
    """Whether anything of the test or helper ``module`` touches OpenMMLab (a module imported as a whole)."""
    seen = _seen | {(module.__name__, None)}
    defs = {n.name for n in _tree(Path(module.__file__).resolve()).body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return _reaches(module, frozenset(defs), seen)


def item_touches_openmmlab(item) -> bool:
    """Whether the test ``item`` (a pytest function item) touches OpenMMLab: its module's level does, or what the test
    reaches (its function or class, by the rules of this file's docstring)."""
    root = item.cls.__name__ if getattr(item, 'cls', None) is not None else item.originalname
    return _reaches(item.module, frozenset({root}), frozenset())
