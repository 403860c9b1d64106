"""Run mmdet's or mmseg's own ``tools/<name>.py`` (shipped inside the installed package under
``.mim/tools``) for a config of this repo, choosing the library from the config's ``default_scope``.

One addition for CPU-only machines: mmengine's ``pytorch`` launcher calls ``torch.cuda.set_device`` and
wraps the model with ``device_ids=[LOCAL_RANK]``, both of which fail without a GPU. Under ``torchrun``
with ``--launcher pytorch`` and no CUDA, the gloo process group is initialised here (mmengine then
skips its own initialisation) and the DDP wrapper gets ``device_ids=None``, so multi-process runs work
on CPUs too.
"""
import os
import os.path as osp
import runpy
import sys


def task_of(config_path):
    from mmengine.config import Config

    scope = Config.fromfile(config_path).get('default_scope')
    if scope not in ('mmdet', 'mmseg'):
        raise SystemExit(f'{config_path}: default_scope is {scope!r}; expected an mmdet or mmseg config')
    return scope


def _launcher(argv):
    for i, arg in enumerate(argv):
        if arg == '--launcher' and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith('--launcher='):
            return arg.split('=', 1)[1]
    return 'none'


def _prepare_cpu_distributed(argv):
    import torch
    import torch.distributed as dist

    if _launcher(argv) != 'pytorch' or torch.cuda.is_available() or dist.is_initialized():
        return argv
    if 'LOCAL_RANK' not in os.environ:
        raise SystemExit('--launcher pytorch needs torchrun (or torch.distributed.run) to start the processes')
    dist.init_process_group(backend='gloo')
    return argv + ['--cfg-options', 'env_cfg.dist_cfg.backend=gloo',
                   'model_wrapper_cfg.type=MMDistributedDataParallel', 'model_wrapper_cfg.device_ids=None']


def run_task_tool(name):
    """``python tools/<name>.py CONFIG [args]`` -> the task library's ``tools/<name>.py CONFIG [args]``."""
    if len(sys.argv) < 2 or sys.argv[1].startswith('-'):
        raise SystemExit(f'usage: python tools/{name}.py CONFIG [options of mmdet/mmseg tools/{name}.py]')
    package = __import__(task_of(sys.argv[1]))
    script = osp.join(osp.dirname(package.__file__), '.mim', 'tools', f'{name}.py')
    if not osp.isfile(script):
        raise SystemExit(f'{package.__name__} has no {script}; reinstall it with pip (not from a source tree)')
    sys.argv = [script] + _prepare_cpu_distributed(sys.argv[1:])
    runpy.run_path(script, run_name='__main__')
