"""The command-line scripts' modules, for the tests that call their functions: loaded from their files (``tools/``
and ``demo/`` are folders of scripts, not packages, and are not on the import path)."""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_tool(path):
    """The module of the script ``path`` in the repository (e.g. ``'tools/analysis_tools/get_flops.py'``), loaded
    once per test process."""
    name = path[:-len('.py')].replace('/', '.')
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module          # registered before it runs, as an import would (dataclasses need it)
        spec.loader.exec_module(module)
    return sys.modules[name]
