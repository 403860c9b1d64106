"""What it costs to reproduce the paper's trainings: GPU-hours and wall time from measured seconds per iteration.

    python tools/analysis_tools/training_cost.py RECORD.json [RECORD.json ...] [--amp fp16] [--padding-aware config]
        [--out docs_table.md] [--only REGEX]

RECORDs are the JSON files of ``tools/analysis_tools/benchmark_training.py`` (one training run each; ``--backbone-only``
records give a backbone's forward + backward time). For every schedule of the paper (Mask R-CNN and Cascade
Mask R-CNN 1x/3x with InLine-Swin-T/S/B, UperNet 160k T/S/B, InLine-PVT-T/S/M/L Mask R-CNN 1x, RetinaNet 1x and
Semantic FPN 40k) the table gives:

* iterations, read from the config itself (mmengine ``Config``): ``train_cfg.max_iters`` for an
  iteration-based schedule; ``max_epochs`` x ceil(117,266 / total batch) for an epoch-based COCO one, 117,266
  being train2017's 118,287 images less the 1,021 without annotations that the configs' ``filter_empty_gt``
  drops; total batch = 8 GPUs x the config's ``train_dataloader.batch_size`` (16 for every config here);
* seconds per iteration with the config's batch per GPU (2), and where it comes from: ``measured`` (a record of
  this config), ``measured (1x/3x twin)`` (a record of the same model's other schedule: same pipeline, same
  per-iteration work), ``derived`` (the family's T/tiny row measured, plus the difference of the two backbones'
  measured forward + backward times, ``--backbone-only`` records of the same run), or ``-``;
* GPU-hours (iterations x 8 x s/iter / 3600: the 8 GPUs' work done by one) and the wall time on 8 GPUs
  (iterations x s/iter, assuming data-parallel scaling with no communication cost; DDP's gradient
  all-reduce adds to it);
* the same for the upstream reference with the same schedule where mmdet/mmseg have one (Swin-T's Mask R-CNN
  multi-scale-crop config, Swin-T's UperNet, PVT-T's RetinaNet), on the T rows.

Only records of the chosen ``--amp`` and padding-aware setting count (``config``: each config's own default),
and only of the real sizes: a record made with ``--scale-down`` (CPU tests) is refused.
"""
import argparse
import glob
import json
import math
import os.path as osp
import re
import sys

from inline_backbones.cli import run_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
COCO_TRAIN_IMAGES = 117266      # train2017 images with annotations (filter_empty_gt=True in every COCO config)
GPUS = 8                        # the recipe: 8 GPUs x 2 images

SWIN_MASK_REF = 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py'
SWIN_UPERNET_REF = 'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'
PVT_RETINA_REF = 'mmdet::pvt/retinanet_pvt-t_fpn_1x_coco.py'


def paper_rows():
    """(family, size, schedule, config, twin config, reference config or None), in the table's order."""
    rows = []
    for family, stem in (('Mask R-CNN + InLine-Swin', 'mask-rcnn'), ('Cascade Mask R-CNN + InLine-Swin',
                                                                       'cascade-mask-rcnn')):
        for size in 'tsb':
            for sched, twin in (('1x', '3x'), ('3x', '1x')):
                cfg = f'mmdet_configs/{stem}_inline-swin-{size}_fpn_ms-crop-{sched}_coco.py'
                rows.append((family, size.upper(), sched, cfg, cfg.replace(f'-{sched}_', f'-{twin}_'),
                             SWIN_MASK_REF if stem == 'mask-rcnn' else None))
    for size in ('tiny', 'small', 'base'):
        rows.append(('UperNet + InLine-Swin', size[0].upper(), '160k',
                     f'mmseg_configs/inline-swin-{size}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py', None,
                     SWIN_UPERNET_REF))
    for family, pattern, sched, ref in (
            ('Mask R-CNN + InLine-PVT', 'mmdet_configs/mask-rcnn_inline-pvt-{}_fpn_1x_coco.py', '1x', None),
            ('RetinaNet + InLine-PVT', 'mmdet_configs/retinanet_inline-pvt-{}_fpn_1x_coco.py', '1x', PVT_RETINA_REF),
            ('Semantic FPN + InLine-PVT', 'mmseg_configs/fpn_inline-pvt-{}_8xb2-40k_ade20k-512x512.py', '40k', None)):
        for size in 'tsml':
            rows.append((family, size.upper(), sched, pattern.format(size), None, ref))
    return rows


def load_config(name):
    from mmengine.config import Config

    if '::' in name:
        import tempfile
        with tempfile.NamedTemporaryFile('w', suffix='.py', delete=False) as f:
            f.write(f'_base_ = {name!r}\n')
        return Config.fromfile(f.name)
    return Config.fromfile(osp.join(ROOT, name) if not osp.isabs(name) else name)


def schedule(cfg):
    """(iterations, total batch on 8 GPUs, how the iterations were counted) of a training config."""
    batch = cfg.train_dataloader.batch_size * GPUS
    loop = cfg.train_cfg
    if 'max_iters' in loop:
        return loop.max_iters, batch, f'{loop.max_iters} iterations'
    per_epoch = math.ceil(COCO_TRAIN_IMAGES / batch)
    return loop.max_epochs * per_epoch, batch, f'{loop.max_epochs} epochs x {per_epoch}'


def config_padding_aware(cfg):
    backbone = cfg.model.backbone
    return bool(backbone.get('padding_aware', False)) if 'inline' in backbone.type.lower() else None


def _norm(config):
    if '::' in config:
        return config
    path = osp.abspath(osp.join(ROOT, config)) if not osp.isabs(config) else config
    return osp.relpath(path, ROOT)


def load_records(paths, amp):
    """Training and backbone records of ``amp`` at the real sizes, keyed by normalised config; the newest
    one wins. Each value is a list of records (several padding-aware settings)."""
    runs, backbones = {}, {}
    for path in paths:
        with open(path) as f:
            record = json.load(f)
        if record.get('scale_down', 1) != 1:
            raise SystemExit(f'{path}: made with --scale-down {record["scale_down"]} (a CPU test record); its '
                             'timings say nothing about the real image sizes')
        if record['amp'] != amp:
            continue
        target = backbones if record.get('kind') == 'backbone' else runs
        target.setdefault(_norm(record['config']), []).append(record)
    return runs, backbones


def pick(records, padding_aware):
    """The newest record of the wanted padding-aware mode (None: any) among ``records``."""
    fitting = [r for r in records or [] if padding_aware is None or r.get('padding_aware') in (padding_aware, None)]
    return max(fitting, key=lambda r: r.get('measured_at', '')) if fitting else None


def build_table(records_paths, amp='fp16', padding_aware='config', only=None):
    runs, backbones = load_records(records_paths, amp)
    rows, t_rows = [], {}
    for family, size, sched, config, twin, ref in paper_rows():
        if only and not re.search(only, config):
            continue
        cfg = load_config(config)
        iters, batch, counted = schedule(cfg)
        want = config_padding_aware(cfg) if padding_aware == 'config' else padding_aware == 'on'
        own, source = pick(runs.get(_norm(config)), want), 'measured'
        if own is None and twin:
            own, source = pick(runs.get(_norm(twin)), want), f'measured ({"3x" if sched == "1x" else "1x"} twin)'
        s_iter = own['median_s_per_iter'] if own else None
        if s_iter is not None and size == 'T' and family not in t_rows:
            t_rows[family] = ((config, twin), s_iter)
        if s_iter is None and family in t_rows:
            t_configs, t_s = t_rows[family]
            bb = pick(backbones.get(_norm(config)) or backbones.get(_norm(twin or config)), want)
            bb_t = pick(sum((backbones.get(_norm(c), []) for c in t_configs if c), []), want)
            if bb and bb_t:
                s_iter, source = t_s + bb['median_step_s'] - bb_t['median_step_s'], f'derived (T + backbone {size} - T)'
        if s_iter is None:
            source = '-'
        reference = pick(runs.get(_norm(ref)), None) if ref and size == 'T' else None
        rows.append(dict(family=family, size=size, schedule=sched, config=config, iterations=iters, total_batch=batch,
                         counted=counted, padding_aware=want, s_per_iter=s_iter, source=source,
                         gpu_hours=iters * GPUS * s_iter / 3600 if s_iter is not None else None,
                         wall_hours_8=iters * s_iter / 3600 if s_iter is not None else None,
                         peak_memory_mb=own['peak_memory_mb'] if own else None,
                         reference=ref if reference else None,
                         ref_s_per_iter=reference['median_s_per_iter'] if reference else None,
                         ref_gpu_hours=iters * GPUS * reference['median_s_per_iter'] / 3600 if reference else None))
    return rows


def _f(value, fmt):
    return '-' if value is None else format(value, fmt)


def markdown(rows, records_paths, amp):
    """The table, with the provenance of its figures (device, versions, commands) above it."""
    seen, lines = set(), []
    for path in records_paths:
        with open(path) as f:
            r = json.load(f)
        if r['amp'] != amp:
            continue
        v = r['versions']
        key = (r['device_name'], v['torch'], v.get('cuda'), v.get('mmcv'), v.get('mmcv_ops'), v.get('openmmlab_line'))
        if key not in seen:
            seen.add(key)
            lines.append(f'- device: {r["device_name"]}; torch {v["torch"]}, CUDA {v.get("cuda")}, '
                         f'mmcv {v.get("mmcv")} (ops: {v.get("mmcv_ops")}), mmengine {v.get("mmengine")}, '
                         f'mmdet {v.get("mmdet")}, mmseg {v.get("mmseg")}'
                         + (f' ({v["openmmlab_line"]} OpenMMLab line)' if v.get('openmmlab_line') else ''))
    lines.append(f'- precision: {amp}; seconds per iteration are medians after warm-up, 1 GPU, the config\'s '
                 'batch per GPU (2)')
    lines += ['', '| model | size | schedule | iterations | s/iter | source | GPU-hours (1 GPU) | wall time on 8 GPUs '
              '| peak memory (MB) | reference s/iter | reference GPU-hours |', '|' + '---|' * 11]
    for r in rows:
        ref = 'Swin-T' if r['reference'] and 'swin' in r['reference'] else 'PVT-T' if r['reference'] else ''
        lines.append(f'| {r["family"]} | {r["size"]} | {r["schedule"]} | {r["iterations"]:,} ({r["counted"]}) '
                     f'| {_f(r["s_per_iter"], ".3f")} | {r["source"]} | {_f(r["gpu_hours"], ".0f")} '
                     f'| {_f(r["wall_hours_8"], ".1f")} h | {_f(r["peak_memory_mb"], ".0f")} '
                     f'| {(ref + ": " + _f(r["ref_s_per_iter"], ".3f")) if ref else "-"} '
                     f'| {_f(r["ref_gpu_hours"], ".0f")} |')
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('records', nargs='+',
                        help='JSON records of tools/analysis_tools/benchmark_training.py (globs allowed)')
    parser.add_argument('--amp', choices=('none', 'fp16', 'bf16'), default='fp16')
    parser.add_argument('--padding-aware', choices=('config', 'on', 'off'), default='config')
    parser.add_argument('--only', help='rows whose config path matches this regular expression')
    parser.add_argument('--out', help='write the Markdown here (default: print it)')
    parser.add_argument('--json', help='also write the rows as JSON here')
    args = parser.parse_args(argv)
    paths = sorted({p for pattern in args.records for p in (glob.glob(pattern) or [pattern])})
    rows = build_table(paths, args.amp, args.padding_aware, args.only)
    text = markdown(rows, paths, args.amp)
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == '__main__':
    run_tool(main, 'training_cost')
