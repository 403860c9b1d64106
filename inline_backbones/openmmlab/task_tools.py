"""mmdet or mmseg, chosen by a config's ``default_scope``: a config read (:func:`read_config`, files and
``mmdet::`` / ``mmseg::`` names), the task of a config (:func:`task_of`), its model built
outside a Runner (:func:`build_task_model`), and mmdet's or mmseg's own ``tools/<name>.py`` (shipped inside the
installed package under ``.mim/tools``) run for it (:func:`run_task_tool`, behind ``tools/train.py`` and
``tools/test.py``). Nothing here imports mmdet or mmseg until a function needs it.

One addition for CPU-only machines: mmengine's ``pytorch`` launcher calls ``torch.cuda.set_device`` and
wraps the model with ``device_ids=[LOCAL_RANK]``, both of which fail without a GPU. Under ``torchrun``
with ``--launcher pytorch`` and no CUDA, the gloo process group is initialised here (mmengine then
skips its own initialisation) and the DDP wrapper gets ``device_ids=None``, so multi-process runs work
on CPUs too. ``SyncBatchNorm`` only runs on GPUs, so on that path every SyncBN layer of the model (the
Cascade and UperNet heads use them) becomes a per-process BN, through ``--cfg-options`` entries that
the saved config and the log show.
"""
import argparse
import os
import os.path as osp
import runpy
import sys

SYNC_BN_TYPES = ('SyncBN', 'MMSyncBN')  # mmcv's names for torch's and mmcv's SyncBatchNorm (GPU only)
# The datasets ClassCheckHook checks before each tool's run starts: training also validates.
CHECKED_SPLITS = {'train': ('train', 'val'), 'test': ('test',)}


def read_config(path):
    """The mmengine ``Config`` of the config file ``path`` (:func:`check_config`; an ``mmdet::`` / ``mmseg::`` name
    is read from the installed package's configs, as ``_base_`` names are). A config that does not load
    because of what it says (a ``_base_`` that does not exist, a syntax error, a name it does not define, in it or in a
    config it inherits) is a :class:`ToolInputError` naming the file and the error."""
    from mmengine.config import Config

    from ..data.tool_inputs import ToolInputError, check_config
    from .upstream_recipe import RecipeError, recipe_path

    check_config(path)
    if '::' in path:   # an upstream config by its scope name: its file in the installed package
        try:
            path = recipe_path(path)
        except RecipeError as err:
            raise ToolInputError(str(err)) from None
    try:
        return Config.fromfile(path)
    except (FileNotFoundError, SyntaxError, NameError) as err:
        what = f'{err.msg} (line {err.lineno})' if isinstance(err, SyntaxError) and err.lineno else str(err)
        raise ToolInputError(f'config {path!r} does not load: {type(err).__name__}: {what}') from err


def task_of(config):
    """'mmdet' or 'mmseg', from the ``default_scope`` of a config (path or loaded ``Config``); a
    :class:`~.tool_inputs.ToolInputError` for another."""
    from mmengine.config import Config

    from ..data.tool_inputs import ToolInputError

    cfg = config if isinstance(config, Config) else read_config(config)
    scope = cfg.get('default_scope')
    if scope not in ('mmdet', 'mmseg'):
        raise ToolInputError(f'{cfg.filename}: default_scope is {scope!r}; expected an mmdet or mmseg config')
    return scope


def build_task_model(config):
    """``(task, model, Sample)`` for a config (path or ``Config``): its model in eval mode, built by the task's
    registry without ``init_cfg`` weights (no download), SyncBN reverted to BN (no process group needed), and the
    task's data sample class (``DetDataSample`` / ``SegDataSample``)."""
    from mmengine.config import Config
    from mmengine.model import revert_sync_batchnorm
    from mmengine.registry import init_default_scope


    cfg = config if isinstance(config, Config) else read_config(config)
    task = task_of(cfg)
    cfg.model.backbone.init_cfg = None
    if task == 'mmdet':
        from mmdet.registry import MODELS
        from mmdet.structures import DetDataSample as Sample
        from mmdet.utils import register_all_modules
    else:
        from mmseg.registry import MODELS
        from mmseg.structures import SegDataSample as Sample
        from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    init_default_scope(task)
    return task, revert_sync_batchnorm(MODELS.build(cfg.model)).eval(), Sample


def syncbn_to_bn_options(model_cfg, prefix='model'):
    """``--cfg-options`` entries ``<path>.type=BN`` for every SyncBN norm config inside ``model_cfg``
    (list items addressed by index, as mmengine's ``merge_from_dict`` reads them)."""
    if isinstance(model_cfg, dict):
        own = [f'{prefix}.type=BN'] if model_cfg.get('type') in SYNC_BN_TYPES else []
        return own + [opt for key, value in model_cfg.items()
                      for opt in syncbn_to_bn_options(value, f'{prefix}.{key}')]
    if isinstance(model_cfg, (list, tuple)):
        return [opt for i, value in enumerate(model_cfg) for opt in syncbn_to_bn_options(value, f'{prefix}.{i}')]
    return []


def dict_action(option_strings, dest, nargs='+'):
    """mmengine's ``DictAction`` for ``--cfg-options`` (:class:`inline_backbones.cli.ConfigOptions` delegates to it)."""
    from mmengine.config import DictAction

    return DictAction(option_strings, dest, nargs=nargs)


def _user_cfg_options(argv):
    """The ``--cfg-options`` the user passed, parsed as the task tools parse them."""
    from mmengine.config import DictAction

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    return parser.parse_known_args(argv)[0].cfg_options or {}


def _launcher(argv):
    for i, arg in enumerate(argv):
        if arg == '--launcher' and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith('--launcher='):
            return arg.split('=', 1)[1]
    return 'none'


def _prepare_cpu_distributed(argv, cfg, name):
    import torch
    import torch.distributed as dist

    if _launcher(argv) != 'pytorch' or torch.cuda.is_available() or dist.is_initialized():
        return argv
    if 'LOCAL_RANK' not in os.environ:
        raise SystemExit('--launcher pytorch needs torchrun (or torch.distributed.run) to start the processes')
    dist.init_process_group(backend='gloo')
    to_bn = syncbn_to_bn_options(cfg.model)
    if to_bn and dist.get_rank() == 0:
        print(f'[tools/{name}.py] CPU processes: SyncBN -> BN (statistics per process) at '
              + ', '.join(opt[:-len('.type=BN')] for opt in to_bn), file=sys.stderr)
    return argv + ['--cfg-options', 'env_cfg.dist_cfg.backend=gloo',
                   'model_wrapper_cfg.type=MMDistributedDataParallel', 'model_wrapper_cfg.device_ids=None', *to_bn]


def _explain_by_classes(cfg, name):
    """Raise the :class:`~.class_check.ClassMismatchError` of ``cfg``'s ``ClassCheckHook`` where its classes disagree
    (the hook's check on the config alone, :func:`~.class_check.check_config_classes`); a check that cannot be made
    raises nothing."""
    from .class_check import ClassMismatchError, check_config_classes

    try:
        check_config_classes(cfg, CHECKED_SPLITS[name])
    except ClassMismatchError:
        raise
    except Exception:  # noqa: BLE001 - the config cannot be checked alone: the run's own error stands
        return


def run_task_tool(name, argv=None):
    """``python tools/<name>.py CONFIG [args]`` -> the task library's ``tools/<name>.py CONFIG [args]`` (``argv``: the
    arguments, ``sys.argv[1:]`` by default), in this process.

    A run that fails before ``ClassCheckHook`` could check its classes (a training set that its classes leave empty
    fails as it is built) fails with the hook's error instead, where the config carries the hook and its classes
    disagree (:func:`_explain_by_classes`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0].startswith('-'):
        raise SystemExit(f'usage: python tools/{name}.py CONFIG [options of mmdet/mmseg tools/{name}.py]')

    cfg = read_config(argv[0])
    package = __import__(task_of(cfg))
    script = osp.join(osp.dirname(package.__file__), '.mim', 'tools', f'{name}.py')
    if not osp.isfile(script):
        raise SystemExit(f'{package.__name__} has no {script}; reinstall it with pip (not from a source tree)')
    cfg.merge_from_dict(_user_cfg_options(argv))
    given = sys.argv
    sys.argv = [script] + _prepare_cpu_distributed(argv, cfg, name)
    try:
        runpy.run_path(script, run_name='__main__')
    except Exception:
        _explain_by_classes(cfg, name)
        raise
    finally:
        sys.argv = given
