"""Training iterations of a detection or segmentation config through mmengine's Runner, measured.

    python tools/analysis_tools/benchmark_training.py CONFIG [--iters 50] [--warmup 10] [--amp fp16|bf16|none]
        [--padding-aware on|off|config] [--batch-size N] [--workers N] [--launcher none|pytorch]
        [--out FILE] [--work-dir DIR] [--num-images 32] [--seed 0] [--scale-down F] [--backbone-only]
    torchrun --nproc_per_node 1 tools/analysis_tools/benchmark_training.py CONFIG --launcher pytorch ...

CONFIG is a config of this repository (``mmdet_configs/...``, ``mmseg_configs/...``) or an upstream one by its
scope name, e.g. ``mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py`` or
``mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py`` (loaded through a one-line config that inherits
it, the only way mmengine resolves the scope).

What it does, in order:

1. Generates a small data set in the config's own layout under the work dir (nothing is downloaded;
   :mod:`.training_data`, drawn by the shapes generator of :mod:`inline_backbones.data.shapes`): for an mmdet
   config a COCO-format json (``ann_file``) with ``--num-images`` images of COCO's sizes (640x480, 480x640,
   640x427) showing 2-5 filled shapes each, labelled with classes of the config's dataset; for an mmseg config
   ADE20K-style images of ADE20K's sizes (683x512, 512x683) and PNG label maps of 2-5 shapes (values 1..num_classes
   on 0, the ignored "other" label, where the dataset reduces zero labels). Only ``data_root`` of the train dataset
   changes: the config's pipeline runs as it is (COCO: the multi-scale 1333x(480..800) resize with the DETR-style
   crop branch; ADE20K: the 0.5-2x resize of 2048x512 and the 512x512 crops).
2. Changes the config for a measurement (:mod:`.training_config`): an ``IterBasedTrainLoop`` of ``--iters``
   iterations with no validation and no test, no checkpoint saving, no checkpoint loading
   (``model.backbone.init_cfg=None``, ``load_from=None``: the GPU machine has no network), ``--amp`` as
   mmdet's/mmseg's ``--amp`` does (``AmpOptimWrapper``, dynamic loss scaling) with the autocast dtype (fp16 or
   bf16), ``--padding-aware`` for InLine backbones (``on`` also swaps mmdet's/mmseg's data preprocessor for this
   package's region preprocessor, which carries each image's size; ``config``, the default, keeps the config's
   choice), ``--batch-size`` / ``--workers`` for the train dataloader if given.
3. Runs mmengine's Runner and records, per iteration (:mod:`.training_recorder`), the train step's time (from the
   first ``before_train_iter`` hook to the first ``after_train_iter`` hook, the model's ``train_step``: forward,
   backward, optimizer step; CUDA-synchronised on a GPU), the whole iteration's wall time (between consecutive
   ``after_train_iter`` calls: data loading and every hook included), the logged losses, the AMP loss scale, and
   the peak memory of the step (``torch.cuda.max_memory_allocated``, reset before each step, on a GPU; on a CPU the
   process's peak resident set size, ``ru_maxrss``, labelled as such).
4. Writes one JSON record to ``--out`` (default ``outputs/benchmark_training/<config>_<amp>_<pa>.json``):
   config, backbone, AMP dtype, padding-aware mode, device name, Python/torch/CUDA/cuDNN/mmcv (and whether
   its ops are compiled for CUDA)/mmengine/mmdet/mmseg/timm versions (:mod:`.environment`), the command line, the
   median seconds per iteration and per step after ``--warmup`` iterations, the peak memory, whether every loss was
   finite, the iteration count, and the distributed set-up: launcher, world size, backend, the model wrapper's class
   (``MMDistributedDataParallel`` under ``--launcher pytorch``) and the number of SyncBN layers in the
   wrapped model. ``tools/analysis_tools/training_cost.py`` turns such records into the cost table of
   docs/training_cost.md.

``--backbone-only`` skips the data and the Runner: the backbone's forward + backward alone, ``--iters`` times on
one random batch of the training size, under ``--amp`` autocast (:func:`backbone_only`).

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
import shlex
import statistics
import sys
import tempfile
import time

import torch

from ..cli import progress
from ..openmmlab.task_tools import task_of
from . import environment
from .timing import wall_clock
from .training_config import (
    backbone_summary,
    leaf_dataset,
    load_config,
    log_interval,
    prepare_config,
    prepare_cpu_distributed,
)
from .training_data import fixed_size_of, generate_coco, generate_seg
from .training_recorder import make_recorder, measured_device, peak_mb, peak_memory_kind, reset_peak, summarise

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TOOL = osp.join(ROOT, 'tools', 'analysis_tools', 'benchmark_training.py')


def parse_args(argv=None):
    """The options of ``argv`` (default ``sys.argv``), ``--warmup`` defaulted and the counts checked."""
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


def default_out(args, name):
    """outputs/benchmark_training/<config>[_backbone]_<amp>[_pa-MODE][_ddp].json under the repository."""
    stem = osp.splitext(osp.basename(name.split('::')[-1]))[0]
    pa = '' if args.padding_aware == 'config' else f'_pa-{args.padding_aware}'
    dist = '_ddp' if args.launcher != 'none' else ''
    kind = '_backbone' if args.backbone_only else ''
    return osp.join(ROOT, 'outputs', 'benchmark_training', f'{stem}{kind}_{args.amp}{pa}{dist}.json')


def backbone_only(cfg, args, task):
    """Forward + backward of the config's backbone alone (loss: the sum of its outputs' means), ``--iters``
    times on one random batch of the training input size, under ``--amp`` autocast; returns the device and the
    record's measured part."""
    from mmengine.registry import MODELS, DefaultScope

    device = measured_device()
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
        reset_peak(device)
        start = wall_clock(device)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            out = model(x)
        loss = sum(o.float().mean() for o in out)
        loss.backward()
        model.zero_grad(set_to_none=True)
        rows.append(dict(iter=i + 1, step_s=wall_clock(device) - start, losses=dict(loss=float(loss.detach())),
                         peak_mb=peak_mb(device)))
        if (i + 1) % log_interval(args.iters) == 0 or i + 1 == args.iters:
            progress('benchmark_training', f'iteration {i + 1}/{args.iters}: {rows[-1]["step_s"]:.3f} s, loss '
                     f'{rows[-1]["losses"]["loss"]:.4g}')
    measured = rows[args.warmup:]
    return device, dict(kind='backbone', input_size=list(size), batch_size=batch, per_iter=rows,
                        median_step_s=statistics.median(r['step_s'] for r in measured),
                        peak_memory_mb=max(r['peak_mb'] for r in rows),
                        losses_finite=all(math.isfinite(r['losses']['loss']) for r in rows))


def _device_name(device):
    """The record's device name: the GPU's, or the CPU's with its cores and torch's threads."""
    if device.type == 'cuda':
        return environment.device_name(device)
    return f'{environment.device_name(device)} ({os.cpu_count()} cores, {torch.get_num_threads()} threads)'


def _provenance(args, cfg, task, device, command):
    """What every record starts with: config, task, backbone, modes, device, versions, command, iteration counts."""
    backbone = backbone_summary(cfg.model)
    return dict(config=args.config, task=task, backbone=backbone, amp=args.amp,
                padding_aware=backbone['padding_aware'], padding_aware_arg=args.padding_aware,
                device=str(device), device_name=_device_name(device), peak_memory_kind=peak_memory_kind(device),
                versions=environment.versions(), command=command, iters=args.iters, warmup=args.warmup,
                scale_down=args.scale_down, measured_at=time.strftime('%Y-%m-%d %H:%M:%S'))


def _write(record, args):
    out = args.out or default_out(args, args.config)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        json.dump(record, f, indent=1)
    return out


def _runner_record(cfg, args, task, command):
    """Steps 1-3 of the module doc for the loaded config ``cfg``: the record of a Runner's iterations, and the
    process's rank."""
    data_root = osp.join(args.work_dir, 'data')
    dataset = leaf_dataset(cfg.train_dataloader)
    if task == 'mmdet':
        data = generate_coco(data_root, dataset, task, args.num_images, args.scale_down, args.seed)
    else:
        data = generate_seg(data_root, dataset, task, args.num_images, args.scale_down, args.seed,
                            fixed_size_of(dataset, cfg.model.data_preprocessor))
    prepare_config(cfg, args, data_root, args.work_dir, task)
    syncbn_to_bn = []
    if args.launcher == 'pytorch' and not torch.cuda.is_available():
        syncbn_to_bn = prepare_cpu_distributed(cfg)

    from mmengine.model import is_model_wrapper
    from mmengine.runner import Runner

    runner = Runner.from_cfg(cfg)
    recorder = make_recorder()
    runner.register_hook(recorder, priority='HIGHEST')
    model = runner.model.module if is_model_wrapper(runner.model) else runner.model
    distributed = dict(launcher=args.launcher, world_size=runner.world_size, backend=None,
                       wrapped=is_model_wrapper(runner.model), wrapper=type(runner.model).__name__,
                       syncbn_layers=sum(type(m).__name__ == 'SyncBatchNorm' for m in runner.model.modules()),
                       syncbn_to_bn=syncbn_to_bn)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        distributed['backend'] = str(torch.distributed.get_backend())
    runner.train()

    loader = cfg.train_dataloader
    record = _provenance(args, cfg, task, next(model.parameters()).device, command)
    record.update(data_preprocessor=cfg.model.data_preprocessor.type, batch_size=loader.batch_size,
                  total_batch=loader.batch_size * runner.world_size, workers=loader.num_workers, data=data,
                  distributed=distributed, optim_wrapper=cfg.optim_wrapper.get('type', 'OptimWrapper'),
                  per_iter=recorder.rows, **summarise(recorder.rows, args.warmup))
    return record, runner.rank


def main(argv=None):
    """Run the command line ``argv`` (a list, or ``sys.argv``): measure, write the record (rank 0), print its
    line; the record."""
    args = parse_args(argv)
    # the command that reproduces this record: the tool with the arguments it was given (not the host process's)
    command = ' '.join(shlex.quote(a) for a in [sys.executable, TOOL] + (sys.argv[1:] if argv is None else list(argv)))
    args.work_dir = args.work_dir or tempfile.mkdtemp(prefix='benchmark_training_')
    os.makedirs(args.work_dir, exist_ok=True)
    if args.amp != 'none' and not args.backbone_only and not torch.cuda.is_available():
        raise SystemExit(f'--amp {args.amp} needs a GPU: mmengine {__import__("mmengine").__version__}\'s '
                         'AmpOptimWrapper refuses to be built without one (use --amp none on a CPU)')
    cfg = load_config(args.config, args.work_dir)
    task = task_of(cfg)
    if args.backbone_only:
        device, measured = backbone_only(cfg, args, task)
        record = dict(_provenance(args, cfg, task, device, command), **measured)
        out = _write(record, args)
        print(f'[benchmark_training] backbone of {args.config} amp={args.amp}: {record["median_step_s"]:.4f} s per '
              f'forward + backward at {record["batch_size"]} x {record["input_size"]} -> {out}')
        return record

    record, rank = _runner_record(cfg, args, task, command)
    if rank == 0:
        out = _write(record, args)
        print(f'[benchmark_training] {args.config} amp={args.amp} padding_aware={record["padding_aware"]}: '
              f'{record["median_s_per_iter"]:.3f} s/iter ({record["median_step_s"]:.3f} s/step) after '
              f'{args.warmup} of {args.iters} iterations, peak {record["peak_memory_mb"]:.0f} MB '
              f'({record["peak_memory_kind"]}), losses finite: {record["losses_finite"]}, '
              f'wrapper {record["distributed"]["wrapper"]}, SyncBN layers {record["distributed"]["syncbn_layers"]} '
              f'-> {out}')
    return record
