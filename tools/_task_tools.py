"""Run mmdet's or mmseg's own ``tools/<name>.py`` (shipped inside the installed package under
``.mim/tools``) for a config of this repo, choosing the library from the config's ``default_scope``."""
import os.path as osp
import runpy
import sys


def task_of(config_path):
    from mmengine.config import Config

    scope = Config.fromfile(config_path).get('default_scope')
    if scope not in ('mmdet', 'mmseg'):
        raise SystemExit(f'{config_path}: default_scope is {scope!r}; expected an mmdet or mmseg config')
    return scope


def run_task_tool(name):
    """``python tools/<name>.py CONFIG [args]`` -> the task library's ``tools/<name>.py CONFIG [args]``."""
    if len(sys.argv) < 2 or sys.argv[1].startswith('-'):
        raise SystemExit(f'usage: python tools/{name}.py CONFIG [options of mmdet/mmseg tools/{name}.py]')
    package = __import__(task_of(sys.argv[1]))
    script = osp.join(osp.dirname(package.__file__), '.mim', 'tools', f'{name}.py')
    if not osp.isfile(script):
        raise SystemExit(f'{package.__name__} has no {script}; reinstall it with pip (not from a source tree)')
    sys.argv[0] = script
    runpy.run_path(script, run_name='__main__')
