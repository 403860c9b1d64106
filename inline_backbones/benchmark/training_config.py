"""The training benchmark's config: a detection or segmentation config (a file, or an upstream one by its scope
name) turned into a measurement's (:func:`prepare_config`: ``--iters`` iterations, no validation, no checkpoints,
``--amp``, ``--padding-aware``, the generated data's root, ``--scale-down``) and, for torchrun without a GPU, the
distributed set-up of ``tools/train.py`` (:func:`prepare_cpu_distributed`)."""
import os
import os.path as osp

from ..openmmlab.task_tools import read_config, syncbn_to_bn_options

REGION_PREPROCESSORS = {'mmdet': ('DetDataPreprocessor', 'inline_backbones.RegionDetDataPreprocessor',
                                  'inline_backbones.openmmlab.det_preprocessor'),
                        'mmseg': ('SegDataPreProcessor', 'inline_backbones.RegionSegDataPreProcessor',
                                  'inline_backbones.openmmlab.seg_preprocessor')}
SCALED_KEYS = ('scale', 'scales', 'crop_size', 'size', 'min_size')


def log_interval(iters):
    """Iterations between two progress lines: at most 10, about a fifth of ``iters``."""
    return max(1, min(10, iters // 5))


def load_config(name, work_dir):
    """The Config of a file, or of ``mmdet::``/``mmseg::`` NAME through a config that inherits it (mmengine's
    ``Config.fromfile`` does not resolve a scope given as the file itself); a config that is missing or does not load
    is a :class:`~inline_backbones.data.tool_inputs.ToolInputError`."""
    if '::' in name:
        shim = osp.join(work_dir, 'upstream_' + osp.basename(name.split('::', 1)[1]))
        with open(shim, 'w') as f:
            f.write(f'_base_ = {name!r}\n')
        return read_config(shim)
    return read_config(name)


def leaf_dataset(dataloader_cfg):
    """The dataset config under any wrappers (``RepeatDataset``, ``ClassBalancedDataset``...)."""
    dataset = dataloader_cfg['dataset']
    while 'dataset' in dataset:
        dataset = dataset['dataset']
    if 'datasets' in dataset:
        raise SystemExit('a ConcatDataset train set is not supported: point --config at one dataset')
    return dataset


def scale_down(obj, factor):
    """Divide every size under the keys of SCALED_KEYS in ``obj`` (nested dicts and lists) by ``factor``, in
    place; sizes are ints or tuples/lists of ints (kept at 1 or more)."""
    def shrink(value):
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)):
            return max(1, int(round(value / factor)))
        if isinstance(value, (list, tuple)):
            return type(value)(shrink(v) for v in value)
        return value

    if isinstance(obj, dict):
        for key, value in obj.items():
            obj[key] = shrink(value) if key in SCALED_KEYS and value is not None else scale_down(value, factor)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            obj[i] = scale_down(value, factor)
    return obj


def backbone_summary(model_cfg):
    """The record's backbone: its type, arch and padding-aware mode (None for a backbone that has none)."""
    backbone = model_cfg['backbone']
    arch = backbone.get('arch')
    return dict(type=backbone['type'], arch=arch if isinstance(arch, (str, type(None))) else dict(arch),
                padding_aware=backbone.get('padding_aware') if 'inline' in backbone['type'].lower() else None)


def _set_padding_aware(cfg, mode, task):
    """``--padding-aware on|off`` for an InLine backbone; ``on`` also swaps mmdet's/mmseg's data preprocessor for
    this package's region preprocessor (imported, and listed in ``custom_imports``)."""
    if 'inline' not in cfg.model.backbone.type.lower():
        raise SystemExit(f'--padding-aware {mode}: the backbone {cfg.model.backbone.type} is not '
                         'an InLine backbone (only InLine backbones have a padding-aware mode)')
    cfg.model.backbone.padding_aware = mode == 'on'
    plain, region, module = REGION_PREPROCESSORS[task]
    if mode == 'on' and cfg.model.data_preprocessor.type.split('.')[-1] == plain:
        cfg.model.data_preprocessor.type = region
        imports = cfg.get('custom_imports', dict(imports=[], allow_failed_imports=False))
        imports['imports'] = list(imports['imports']) + [module]
        cfg.custom_imports = imports
        from mmengine.utils import import_modules_from_strings
        import_modules_from_strings(imports['imports'])


def prepare_config(cfg, args, data_root, work_dir, task):
    """Turn the training config ``cfg`` into the measurement's (:mod:`.training`, step 2), in place."""
    from mmengine.config import ConfigDict

    loader = cfg.train_dataloader
    leaf_dataset(loader)['data_root'] = data_root
    if args.batch_size:
        loader['batch_size'] = args.batch_size
    if args.workers is not None:
        loader['num_workers'] = args.workers
        if args.workers == 0:
            loader['persistent_workers'] = False
    cfg.train_cfg = ConfigDict(type='IterBasedTrainLoop', max_iters=args.iters, val_interval=args.iters + 1)
    for key in ('val_dataloader', 'val_cfg', 'val_evaluator', 'test_dataloader', 'test_cfg', 'test_evaluator'):
        cfg[key] = None
    cfg.default_hooks.checkpoint = None
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=log_interval(args.iters))
    cfg.log_processor = dict(type='LogProcessor', window_size=1, by_epoch=False)
    cfg.load_from, cfg.resume = None, False
    cfg.work_dir = osp.join(work_dir, 'run')
    cfg.randomness = dict(seed=args.seed)
    cfg.model.backbone.init_cfg = None
    if cfg.model.get('pretrained'):
        cfg.model.pretrained = None
    if args.padding_aware != 'config':
        _set_padding_aware(cfg, args.padding_aware, task)
    if args.amp != 'none':
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.loss_scale = 'dynamic'
        cfg.optim_wrapper.dtype = {'fp16': 'float16', 'bf16': 'bfloat16'}[args.amp]
    if args.scale_down != 1:
        scale_down(loader['dataset'], args.scale_down)     # the pipeline and the dataset's min_size filter
        scale_down(cfg.model.data_preprocessor, args.scale_down)
    cfg.launcher = args.launcher
    return cfg


def prepare_cpu_distributed(cfg):
    """torchrun without a GPU: gloo, DDP with device_ids=None, SyncBN -> BN (as tools/train.py). Returns the
    norm configs changed."""
    import torch.distributed as dist

    if 'LOCAL_RANK' not in os.environ:
        raise SystemExit('--launcher pytorch needs torchrun (or torch.distributed.run) to start the processes')
    if not dist.is_initialized():
        dist.init_process_group(backend='gloo')
    to_bn = syncbn_to_bn_options(cfg.model)
    cfg.merge_from_dict({opt.split('=')[0]: 'BN' for opt in to_bn})
    cfg.env_cfg.dist_cfg = dict(backend='gloo')
    cfg.model_wrapper_cfg = dict(type='MMDistributedDataParallel', device_ids=None)
    return [opt[:-len('.type=BN')] for opt in to_bn]
