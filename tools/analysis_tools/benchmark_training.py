"""Training iterations of a detection or segmentation config through mmengine's Runner, measured.

    python tools/analysis_tools/benchmark_training.py CONFIG [--iters 50] [--warmup 10] [--amp fp16|bf16|none]
        [--padding-aware on|off|config] [--batch-size N] [--workers N] [--launcher none|pytorch]
        [--out FILE] [--work-dir DIR] [--num-images 32] [--seed 0] [--scale-down F]
    torchrun --nproc_per_node 1 tools/analysis_tools/benchmark_training.py CONFIG --launcher pytorch ...

CONFIG is a config of this repository (``mmdet_configs/...``, ``mmseg_configs/...``) or an upstream one by its
scope name, e.g. ``mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py`` or
``mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py`` (loaded through a one-line config that inherits
it, the only way mmengine resolves the scope).

What it does, in order:

1. Generates a small data set in the config's own layout under the work dir (nothing is downloaded): for an
   mmdet config a COCO-format json (``ann_file``) with ``--num-images`` images of COCO's sizes (640x480,
   480x640, 640x427) showing 2-5 filled polygons each, labelled with classes of the config's dataset; for an
   mmseg config ADE20K-style images of ADE20K's sizes (683x512, 512x683) and PNG label maps of random
   polygons (values 1..num_classes, 0 the ignored "other" label where the dataset reduces zero labels).
   Only ``data_root`` of the train dataset changes: the config's pipeline runs as it is (COCO: the
   multi-scale 1333x(480..800) resize with the DETR-style crop branch; ADE20K: the 0.5-2x resize of
   2048x512 and the 512x512 crops).
2. Changes the config for a measurement: an ``IterBasedTrainLoop`` of ``--iters`` iterations with no
   validation and no test, no checkpoint saving, no checkpoint loading (``model.backbone.init_cfg=None``,
   ``load_from=None``: the GPU machine has no network), ``--amp`` as mmdet's/mmseg's ``--amp`` does
   (``AmpOptimWrapper``, dynamic loss scaling) with the autocast dtype (fp16 or bf16), ``--padding-aware``
   for InLine backbones (``on`` also swaps mmdet's/mmseg's data preprocessor for this package's region
   preprocessor, which carries each image's size; ``config``, the default, keeps the config's choice),
   ``--batch-size`` / ``--workers`` for the train dataloader if given.
3. Runs mmengine's Runner and records, per iteration, the train step's time (from the first
   ``before_train_iter`` hook to the first ``after_train_iter`` hook, the model's ``train_step``: forward,
   backward, optimizer step; CUDA-synchronised on a GPU), the whole iteration's wall time (between
   consecutive ``after_train_iter`` calls: data loading and every hook included), the logged losses, the
   AMP loss scale, and the peak memory of the step (``torch.cuda.max_memory_allocated``, reset before each
   step, on a GPU; on a CPU the process's peak resident set size, ``ru_maxrss``, labelled as such).
4. Writes one JSON record to ``--out`` (default ``outputs/benchmark_training/<config>_<amp>_<pa>.json``):
   config, backbone, AMP dtype, padding-aware mode, device name, Python/torch/CUDA/cuDNN/mmcv (and whether
   its ops are compiled for CUDA)/mmengine/mmdet/mmseg/timm versions, the command line, the median seconds
   per iteration and per step after ``--warmup`` iterations, the peak memory, whether every loss was finite,
   the iteration count, and the distributed set-up: launcher, world size, backend, the model wrapper's class
   (``MMDistributedDataParallel`` under ``--launcher pytorch``) and the number of SyncBN layers in the
   wrapped model. ``tools/analysis_tools/training_cost.py`` turns such records into the cost table of
   docs/training_cost.md.

Distributed: ``--launcher pytorch`` under torchrun goes through mmengine's own launcher on a GPU (NCCL,
``torch.cuda.set_device``, SyncBN kept). Without a GPU it initialises the gloo process group itself, gives the
DDP wrapper ``device_ids=None`` and turns the config's SyncBN layers into BN, as ``tools/train.py`` does (SyncBN
runs on GPUs only); the record lists the layers it changed.

``--amp fp16|bf16`` needs a GPU: mmengine 0.10.7's ``AmpOptimWrapper`` refuses to be built without one.

``--scale-down F`` is for tests on a CPU only: it divides the generated images' sizes and every ``scale``,
``scales``, ``crop_size`` and ``size`` of the train pipeline and the data preprocessor (and the dataset's
``min_size`` filter) by F, so that a real config trains a step in seconds. Its timings say nothing about
the real sizes: the record carries ``scale_down`` and tools/analysis_tools/training_cost.py refuses such records.
"""
import argparse
import json
import math
import os
import os.path as osp
import platform
import resource
import shlex
import statistics
import sys
import tempfile
import time

import numpy as np

from inline_backbones.cli import progress, run_tool
from inline_backbones.data.tool_inputs import read_config
from inline_backbones.openmmlab.task_tools import syncbn_to_bn_options, task_of

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

COCO_SIZES = ((480, 640), (640, 480), (427, 640))     # (height, width): COCO train2017's common sizes
ADE_SIZES = ((512, 683), (683, 512))                  # ADE20K training images' common sizes
REGION_PREPROCESSORS = {'mmdet': ('DetDataPreprocessor', 'inline_backbones.RegionDetDataPreprocessor',
                                  'inline_backbones.openmmlab.det_preprocessor'),
                        'mmseg': ('SegDataPreProcessor', 'inline_backbones.RegionSegDataPreProcessor',
                                  'inline_backbones.openmmlab.seg_preprocessor')}
SCALED_KEYS = ('scale', 'scales', 'crop_size', 'size', 'min_size')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='a config file, or mmdet::PATH / mmseg::PATH of an upstream config')
    parser.add_argument('--iters', type=int, default=50, help='training iterations (default 50)')
    parser.add_argument('--warmup', type=int,
                        help='iterations left out of the medians (default: 10, or iters - 1 if fewer)')
    parser.add_argument('--amp', choices=('none', 'fp16', 'bf16'), default='none',
                        help="AmpOptimWrapper with this autocast dtype (fp16 is the configs' --amp); GPU only")
    parser.add_argument('--padding-aware', choices=('config', 'on', 'off'), default='config',
                        help="the InLine backbone's padding-aware mode (default: the config's)")
    parser.add_argument('--batch-size', type=int, help="images per process (default: the config's)")
    parser.add_argument('--workers', type=int, help="dataloader workers per process (default: the config's)")
    parser.add_argument('--num-images', type=int, default=32, help='generated training images (default 32)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the generated data and of mmengine')
    parser.add_argument('--launcher', choices=('none', 'pytorch'), default='none')
    parser.add_argument('--work-dir', help='data and logs (default: a new temporary folder)')
    parser.add_argument('--out', help='the JSON record (default outputs/benchmark_training/NAME.json)')
    parser.add_argument('--backbone-only', action='store_true',
                        help="time the backbone's forward + backward alone on random inputs of the training size "
                             '(COCO: 2 x 800x1344, ADE20K: 2 x the crop) under --amp autocast; no data, no Runner')
    parser.add_argument('--scale-down', type=float, default=1.0,
                        help='TESTS ON A CPU ONLY: divide image sizes, resize scales and crop sizes by this')
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = max(0, min(10, args.iters - 1))
    if args.iters < 1 or not 0 <= args.warmup < args.iters:
        parser.error(f'--warmup must lie in [0, --iters) (got --iters {args.iters}, --warmup {args.warmup})')
    if args.scale_down < 1:
        parser.error('--scale-down must be 1 or more')
    return args


def log_interval(iters):
    """Iterations between two progress lines: at most 10, about a fifth of ``iters``."""
    return max(1, min(10, iters // 5))


# ---- config ---------------------------------------------------------------------------------------------
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
    backbone = model_cfg['backbone']
    arch = backbone.get('arch')
    return dict(type=backbone['type'], arch=arch if isinstance(arch, (str, type(None))) else dict(arch),
                padding_aware=backbone.get('padding_aware') if 'inline' in backbone['type'].lower() else None)


def prepare_config(cfg, args, data_root, work_dir, task):
    """Turn the training config ``cfg`` into the measurement's (see the module doc, step 2), in place."""
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

    inline = 'inline' in cfg.model.backbone.type.lower()
    if args.padding_aware != 'config':
        if not inline:
            raise SystemExit(f'--padding-aware {args.padding_aware}: the backbone {cfg.model.backbone.type} is not '
                             'an InLine backbone (only InLine backbones have a padding-aware mode)')
        cfg.model.backbone.padding_aware = args.padding_aware == 'on'
        plain, region, module = REGION_PREPROCESSORS[task]
        if args.padding_aware == 'on' and cfg.model.data_preprocessor.type.split('.')[-1] == plain:
            cfg.model.data_preprocessor.type = region
            imports = cfg.get('custom_imports', dict(imports=[], allow_failed_imports=False))
            imports['imports'] = list(imports['imports']) + [module]
            cfg.custom_imports = imports
            from mmengine.utils import import_modules_from_strings
            import_modules_from_strings(imports['imports'])

    if args.amp != 'none':
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.loss_scale = 'dynamic'
        cfg.optim_wrapper.dtype = {'fp16': 'float16', 'bf16': 'bfloat16'}[args.amp]

    if args.scale_down != 1:
        scale_down(loader['dataset'], args.scale_down)     # the pipeline and the dataset's min_size filter
        scale_down(cfg.model.data_preprocessor, args.scale_down)
    cfg.launcher = args.launcher
    return cfg


# ---- generated data ---------------------------------------------------------------------------------------
def _random_polygon(rng, height, width):
    """A random star-shaped polygon (K x 2 int32 x, y) of 6-12 vertices inside the image, its radius 6-30% of
    the image's shorter side (so it survives a 32-pixel min_size filter at COCO's sizes)."""
    k = int(rng.integers(6, 13))
    radius = rng.uniform(0.06, 0.3) * min(height, width)
    cx, cy = rng.uniform(radius, width - radius), rng.uniform(radius, height - radius)
    angles = np.sort(rng.uniform(0, 2 * np.pi, k))
    radii = radius * rng.uniform(0.6, 1.0, k)
    pts = np.stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)], 1)
    return np.clip(np.round(pts), 0, [width - 1, height - 1]).astype(np.int32)


def _background(rng, height, width):
    import cv2

    coarse = rng.uniform(40, 220, size=(max(2, height // 64), max(2, width // 64), 3))
    img = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC) + rng.normal(0, 8, (height, width, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def dataset_classes(dataset_cfg, task):
    """The dataset's class names: its ``metainfo`` in the config, else its class's ``METAINFO``."""
    import importlib

    classes = (dataset_cfg.get('metainfo') or {}).get('classes')
    if classes:
        return tuple(classes)
    registry = importlib.import_module(f'{task}.registry').DATASETS
    importlib.import_module(f'{task}.datasets')
    cls = registry.get(dataset_cfg['type'])
    if cls is None:
        raise SystemExit(f'unknown dataset type {dataset_cfg["type"]!r} in the {task} registry')
    classes = cls.METAINFO.get('classes')
    if not classes:
        raise SystemExit(f'{dataset_cfg["type"]} has no classes in its METAINFO: give the config a metainfo')
    return tuple(classes)


def _dataset_default(dataset_cfg, task, name, fallback):
    import importlib
    import inspect

    if name in dataset_cfg:
        return dataset_cfg[name]
    cls = importlib.import_module(f'{task}.registry').DATASETS.get(dataset_cfg['type'])
    param = inspect.signature(cls.__init__).parameters.get(name) if cls is not None else None
    return fallback if param is None or param.default is inspect.Parameter.empty else param.default


def generate_coco(root, dataset_cfg, task, num_images, factor, seed):
    """COCO instances with polygon masks in the dataset config's layout under ``root``; returns a summary."""
    import cv2

    rng = np.random.default_rng(seed)
    classes = dataset_classes(dataset_cfg, task)
    img_dir = osp.join(root, (dataset_cfg.get('data_prefix') or {}).get('img', ''))
    os.makedirs(img_dir, exist_ok=True)
    images, annotations = [], []
    for i in range(num_images):
        h, w = (max(32, int(round(s / factor))) for s in COCO_SIZES[i % len(COCO_SIZES)])
        img = _background(rng, h, w)
        name = f'{i:012d}.jpg'
        for _ in range(int(rng.integers(2, 6))):
            poly = _random_polygon(rng, h, w)
            colour = tuple(int(c) for c in rng.integers(0, 256, 3))
            cv2.fillPoly(img, [poly], colour)
            x, y, bw, bh = cv2.boundingRect(poly)
            annotations.append(dict(id=len(annotations) + 1, image_id=i + 1, iscrowd=0,
                                    category_id=int(rng.integers(len(classes))) + 1,
                                    segmentation=[poly.reshape(-1).astype(float).tolist()],
                                    area=float(cv2.contourArea(poly)), bbox=[float(x), float(y), float(bw), float(bh)]))
        cv2.imwrite(osp.join(img_dir, name), img)
        images.append(dict(id=i + 1, file_name=name, height=h, width=w))
    ann_file = osp.join(root, dataset_cfg['ann_file'])
    os.makedirs(osp.dirname(ann_file), exist_ok=True)
    with open(ann_file, 'w') as f:
        json.dump(dict(images=images, annotations=annotations,
                       categories=[dict(id=i + 1, name=name) for i, name in enumerate(classes)]), f)
    return dict(format='coco', images=num_images, objects=len(annotations), classes=len(classes),
                sizes=[list(hw) for hw in sorted({(im['height'], im['width']) for im in images})])


def generate_seg(root, dataset_cfg, task, num_images, factor, seed, fixed_size=None):
    """Images and PNG label maps in the dataset config's layout under ``root``, of ADE20K's sizes or all of
    ``fixed_size`` (h, w); returns a summary."""
    import cv2

    rng = np.random.default_rng(seed)
    classes = dataset_classes(dataset_cfg, task)
    reduce_zero = _dataset_default(dataset_cfg, task, 'reduce_zero_label', False)
    img_suffix = _dataset_default(dataset_cfg, task, 'img_suffix', '.jpg')
    seg_suffix = _dataset_default(dataset_cfg, task, 'seg_map_suffix', '.png')
    prefix = dataset_cfg.get('data_prefix') or {}
    img_dir = osp.join(root, prefix.get('img_path', ''))
    seg_dir = osp.join(root, prefix.get('seg_map_path', ''))
    os.makedirs(img_dir, exist_ok=True)
    os.makedirs(seg_dir, exist_ok=True)
    # label values as stored: 1..C where 0 is the reduced ("other") label, else 0..C-1
    low, high = (1, len(classes) + 1) if reduce_zero else (0, len(classes))
    sizes = set()
    for i in range(num_images):
        h, w = (max(32, int(round(s / factor))) for s in (fixed_size or ADE_SIZES[i % len(ADE_SIZES)]))
        sizes.add((h, w))
        img = _background(rng, h, w)
        label = np.full((h, w), rng.integers(low, high), np.uint8)
        for _ in range(int(rng.integers(3, 8))):
            poly = _random_polygon(rng, h, w)
            cv2.fillPoly(img, [poly], tuple(int(c) for c in rng.integers(0, 256, 3)))
            cv2.fillPoly(label, [poly], int(rng.integers(low, high)))
        name = f'train_{i:08d}'
        cv2.imwrite(osp.join(img_dir, name + img_suffix), img)
        cv2.imwrite(osp.join(seg_dir, name + seg_suffix), label)
    return dict(format='ade20k' if reduce_zero else 'label maps', images=num_images, classes=len(classes),
                reduce_zero_label=bool(reduce_zero), sizes=[list(hw) for hw in sorted(sizes)])


def fixed_size_of(dataset_cfg, preprocessor_cfg):
    """The preprocessor's fixed ``size`` where the train pipeline neither resizes nor crops (a config for
    images of one size, such as the shapes configs), else None (ADE20K's sizes)."""
    steps = {t.get('type', '').split('.')[-1] for t in dataset_cfg.get('pipeline') or []}
    if steps & {'Resize', 'RandomResize', 'RandomChoiceResize', 'RandomCrop', 'RandomResizedCrop'}:
        return None
    size = preprocessor_cfg.get('size')
    return tuple(size) if size else None


# ---- measurement --------------------------------------------------------------------------------------------
def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def make_recorder():
    """An mmengine hook recording each iteration's step time, wall time, losses, loss scale and peak memory."""
    import torch
    from mmengine.hooks import Hook

    class IterationRecorder(Hook):
        priority = 'HIGHEST'

        def __init__(self):
            self.rows, self._start, self._last = [], None, None

        def before_train(self, runner):
            _sync()
            self._last = time.perf_counter()

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            _sync()
            self._start = time.perf_counter()

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            _sync()
            now = time.perf_counter()
            losses = {k: float(v.detach() if isinstance(v, torch.Tensor) else v) for k, v in (outputs or {}).items()}
            scaler = getattr(runner.optim_wrapper, 'loss_scaler', None)
            if torch.cuda.is_available():
                mem = torch.cuda.max_memory_allocated() / 2 ** 20
            else:
                mem = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            self.rows.append(dict(iter=runner.iter + 1, step_s=now - self._start, iter_s=now - self._last,
                                  losses=losses, peak_mb=round(mem, 1),
                                  loss_scale=float(scaler.get_scale()) if scaler is not None else None))
            self._last = now

    return IterationRecorder()


def _versions():
    import importlib

    import torch

    out = dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
               cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
    for name in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'timm'):
        try:
            out[name] = importlib.import_module(name).__version__
        except ImportError:
            out[name] = None
    try:
        from mmcv.ops import get_compiling_cuda_version
        cuda_ops = get_compiling_cuda_version()
        out['mmcv_ops'] = 'cpu' if cuda_ops in ('not available', None) else f'cuda {cuda_ops}'
    except (ImportError, OSError):
        out['mmcv_ops'] = 'none'
    from inline_backbones.openmmlab.line import check_one_line
    out['openmmlab_line'] = check_one_line()
    return out


def _count_syncbn(model):
    return sum(type(m).__name__ == 'SyncBatchNorm' for m in model.modules())


def _prepare_cpu_distributed(cfg):
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


def summarise(rows, warmup):
    measured = rows[warmup:]
    loss_values = [v for r in rows for k, v in r['losses'].items() if 'loss' in k]
    return dict(
        median_s_per_iter=statistics.median(r['iter_s'] for r in measured),
        median_step_s=statistics.median(r['step_s'] for r in measured),
        min_step_s=min(r['step_s'] for r in measured), max_step_s=max(r['step_s'] for r in measured),
        peak_memory_mb=max(r['peak_mb'] for r in rows),
        losses_finite=bool(loss_values) and all(math.isfinite(v) for v in loss_values),
        first_loss=rows[0]['losses'].get('loss'), last_loss=rows[-1]['losses'].get('loss'))


def default_out(args, name):
    stem = osp.splitext(osp.basename(name.split('::')[-1]))[0]
    pa = '' if args.padding_aware == 'config' else f'_pa-{args.padding_aware}'
    dist = '_ddp' if args.launcher != 'none' else ''
    kind = '_backbone' if args.backbone_only else ''
    return osp.join(ROOT, 'outputs', 'benchmark_training', f'{stem}{kind}_{args.amp}{pa}{dist}.json')


def backbone_only(cfg, args, task):
    """Forward + backward of the config's backbone alone (loss: the sum of its outputs' means), ``--iters``
    times on one random batch of the training input size, under ``--amp`` autocast; returns the record's
    measured part."""
    import torch
    from mmengine.registry import MODELS, DefaultScope

    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    backbone_cfg = cfg.model.backbone
    backbone_cfg.init_cfg = None
    if args.padding_aware != 'config':
        backbone_cfg.padding_aware = args.padding_aware == 'on'
    with DefaultScope.overwrite_default_scope(task):     # the task's scope for this build only
        model = MODELS.build(backbone_cfg).to(device).train()
    if task == 'mmdet':
        size = (800, 1344)                          # the largest multi-scale size, padded to 32
    else:
        size = tuple(cfg.model.data_preprocessor.get('size') or (512, 512))
    size = tuple(max(32, int(round(v / args.scale_down))) for v in size)
    batch = args.batch_size or cfg.train_dataloader.batch_size
    x = torch.randn(batch, 3, *size, device=device)
    dtype = {'none': None, 'fp16': torch.float16, 'bf16': torch.bfloat16}[args.amp]
    rows = []
    for i in range(args.iters):
        if device.type == 'cuda':
            torch.cuda.reset_peak_memory_stats()
        _sync()
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            out = model(x)
        loss = sum(o.float().mean() for o in out)
        loss.backward()
        model.zero_grad(set_to_none=True)
        _sync()
        mem = (torch.cuda.max_memory_allocated() / 2 ** 20 if device.type == 'cuda'
               else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        rows.append(dict(iter=i + 1, step_s=time.perf_counter() - start, losses=dict(loss=float(loss.detach())),
                         peak_mb=round(mem, 1)))
        if (i + 1) % log_interval(args.iters) == 0 or i + 1 == args.iters:
            progress('benchmark_training', f'iteration {i + 1}/{args.iters}: {rows[-1]["step_s"]:.3f} s, loss '
                     f'{rows[-1]["losses"]["loss"]:.4g}')
    measured = rows[args.warmup:]
    return device, model, dict(kind='backbone', input_size=list(size), batch_size=batch, per_iter=rows,
                               median_step_s=statistics.median(r['step_s'] for r in measured),
                               peak_memory_mb=max(r['peak_mb'] for r in rows),
                               losses_finite=all(math.isfinite(r['losses']['loss']) for r in rows))


def _device_name(device):
    import torch

    if device.type == 'cuda':
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    return f'{cpu} ({os.cpu_count()} cores, {torch.get_num_threads()} threads)'


def _write(record, args):
    out = args.out or default_out(args, args.config)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        json.dump(record, f, indent=1)
    return out


def main(argv=None):
    args = parse_args(argv)
    import torch

    # the command that reproduces this record: this script with the arguments it was given (not the host process's)
    command = ' '.join(shlex.quote(a) for a in [sys.executable, osp.abspath(__file__)]
                       + (sys.argv[1:] if argv is None else list(argv)))

    work_dir = args.work_dir or tempfile.mkdtemp(prefix='benchmark_training_')
    os.makedirs(work_dir, exist_ok=True)
    if args.backbone_only:
        cfg = load_config(args.config, work_dir)
        task = task_of(cfg)
        device, _, measured = backbone_only(cfg, args, task)
        record = dict(config=args.config, task=task, backbone=backbone_summary(cfg.model), amp=args.amp,
                      padding_aware=backbone_summary(cfg.model)['padding_aware'], padding_aware_arg=args.padding_aware,
                      device=str(device), device_name=_device_name(device), versions=_versions(),
                      command=command, iters=args.iters,
                      warmup=args.warmup, scale_down=args.scale_down,
                      peak_memory_kind='torch.cuda.max_memory_allocated' if device.type == 'cuda' else
                      'cpu_max_rss (whole process)', measured_at=time.strftime('%Y-%m-%d %H:%M:%S'), **measured)
        out = _write(record, args)
        print(f'[benchmark_training] backbone of {args.config} amp={args.amp}: {record["median_step_s"]:.4f} s per '
              f'forward + backward at {record["batch_size"]} x {record["input_size"]} -> {out}')
        return record

    if args.amp != 'none' and not torch.cuda.is_available():
        raise SystemExit(f'--amp {args.amp} needs a GPU: mmengine {__import__("mmengine").__version__}\'s '
                         'AmpOptimWrapper refuses to be built without one (use --amp none on a CPU)')
    cfg = load_config(args.config, work_dir)
    task = task_of(cfg)
    data_root = osp.join(work_dir, 'data')
    dataset = leaf_dataset(cfg.train_dataloader)
    if task == 'mmdet':
        data = generate_coco(data_root, dataset, task, args.num_images, args.scale_down, args.seed)
    else:
        data = generate_seg(data_root, dataset, task, args.num_images, args.scale_down, args.seed,
                            fixed_size_of(dataset, cfg.model.data_preprocessor))
    prepare_config(cfg, args, data_root, work_dir, task)
    syncbn_to_bn = []
    if args.launcher == 'pytorch' and not torch.cuda.is_available():
        syncbn_to_bn = _prepare_cpu_distributed(cfg)

    from mmengine.model import is_model_wrapper
    from mmengine.runner import Runner

    runner = Runner.from_cfg(cfg)
    recorder = make_recorder()
    runner.register_hook(recorder, priority='HIGHEST')
    model = runner.model.module if is_model_wrapper(runner.model) else runner.model
    distributed = dict(launcher=args.launcher, world_size=runner.world_size, backend=None,
                       wrapped=is_model_wrapper(runner.model), wrapper=type(runner.model).__name__,
                       syncbn_layers=_count_syncbn(runner.model), syncbn_to_bn=syncbn_to_bn)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        distributed['backend'] = str(torch.distributed.get_backend())
    runner.train()

    device = next(model.parameters()).device
    record = dict(
        config=args.config, task=task, backbone=backbone_summary(cfg.model), amp=args.amp,
        padding_aware=backbone_summary(cfg.model)['padding_aware'], padding_aware_arg=args.padding_aware,
        data_preprocessor=cfg.model.data_preprocessor.type, device=str(device), device_name=_device_name(device),
        peak_memory_kind='torch.cuda.max_memory_allocated' if device.type == 'cuda' else 'cpu_max_rss (whole process)',
        versions=_versions(), command=command,
        iters=args.iters, warmup=args.warmup, batch_size=cfg.train_dataloader.batch_size,
        total_batch=cfg.train_dataloader.batch_size * runner.world_size, workers=cfg.train_dataloader.num_workers,
        scale_down=args.scale_down, data=data, distributed=distributed,
        optim_wrapper=cfg.optim_wrapper.get('type', 'OptimWrapper'),
        measured_at=time.strftime('%Y-%m-%d %H:%M:%S'), per_iter=recorder.rows)
    record.update(summarise(recorder.rows, args.warmup))
    if runner.rank == 0:
        out = _write(record, args)
        print(f'[benchmark_training] {args.config} amp={args.amp} padding_aware={record["padding_aware"]}: '
              f'{record["median_s_per_iter"]:.3f} s/iter ({record["median_step_s"]:.3f} s/step) after '
              f'{args.warmup} of {args.iters} iterations, peak {record["peak_memory_mb"]:.0f} MB '
              f'({record["peak_memory_kind"]}), losses finite: {record["losses_finite"]}, '
              f'wrapper {distributed["wrapper"]}, SyncBN layers {distributed["syncbn_layers"]} -> {out}')
    return record


if __name__ == '__main__':
    run_tool(main, 'benchmark_training')
