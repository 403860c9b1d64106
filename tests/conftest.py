"""The suite's hooks and fixtures (pytest reads this file; test modules do not import it: what they share as code is
in the helper modules beside it, e.g. ``helpers.py``, ``reference_attention.py``, ``padding_cases.py``)."""
import os

import pytest
import torch
from openmmlab_marker import touches_openmmlab

pytest_plugins = ['time_budget']   # the run's and each test's time against their budgets (tests/time_budget.py)

if not torch.cuda.is_available():   # the Triton kernels run on the CPU under Triton's interpreter (set before any
    os.environ.setdefault('TRITON_INTERPRET', '1')   # kernel is compiled: mixers/inline/paths.py imports them lazily)


def pytest_collection_modifyitems(items):
    """Marks ``openmmlab`` every test of a module that touches OpenMMLab (the rule: openmmlab_marker.py)."""
    marked = {}
    for item in items:
        module = getattr(item, 'module', None)
        if module is None:
            continue
        if module not in marked:
            marked[module] = touches_openmmlab(module)
        if marked[module]:
            item.add_marker(pytest.mark.openmmlab)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _default_scope_is_not_inherited():
    """mmengine's current default scope is the last ``DefaultScope`` created (a Runner creates one, e.g. ``mmseg``)
    and stays for the whole process: a test that runs a Runner in-process would switch every later unscoped
    ``MODELS.build`` to that task's registry. Each test ends with the scopes it started with."""
    from mmengine.registry import DefaultScope

    before = dict(DefaultScope._instance_dict)
    yield
    DefaultScope._instance_dict.clear()
    DefaultScope._instance_dict.update(before)


@pytest.fixture
def no_grad():
    """The test runs under ``torch.no_grad()`` (a module asks for it in every test with
    ``pytestmark = pytest.mark.usefixtures('no_grad')``)."""
    with torch.no_grad():
        yield
