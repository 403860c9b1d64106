"""The benchmark's report: derived columns (ratios), the Markdown table, latency exponents, the window sweep, the
files (results.json, results.csv, results.md, plots), and saved results read back, the two older tools' too."""
import csv
import json
import math
import os
import os.path as osp
import platform
import re
import sys

import numpy as np
import torch

from . import environment, plots
from .names import parse

# The columns of a row, in the order of results.csv; None where not measured.
COLUMNS = ['model', 'size', 'pixels', 'batch', 'dtype', 'device', 'step', 'capture', 'latency_ms', 'min_ms', 'max_ms',
           'images_per_s', 'reference', 'ratio_to_reference', 'speedup_over_fp32', 'launches', 'peak_memory_mb',
           'params_m', 'gflops', 'achieved_gflops_per_s', 'gemm_gflops_per_s', 'gemm_fraction', 'run', 'note']
# The paper's Fig. 3 (GPU): images/s of InLine-Swin-T over Swin-T per window size.
PAPER_WINDOW_SPEEDUP = {28: 1.9, 56: 3.7}
# Rows compared with each other: same run (an index, for results merged from several), input, batch, mode, step and
# capture.
SETTING = ('run', 'size', 'batch', 'dtype', 'step', 'capture')
# What a series of rows (one line of latency against pixels) shares.
SERIES = ('model', 'run', 'batch', 'dtype', 'step', 'capture')


def run_meta(args, device):
    """What the rows were measured on and with: the command, versions, machine, options."""
    flags = [] if device.type == 'cuda' else sorted(f for f in environment.cpu_flags()
                                                    if f.startswith('amx') or f in ('avx512_bf16', 'avx512_fp16'))
    options = {k: ([str(v) for v in value] if k in ('models', 'reference') and value else value)
               for k, value in vars(args).items()}
    return dict(command=' '.join(sys.argv), torch=torch.__version__, python=platform.python_version(),
                machine=environment.device_name(device), device=device.type, threads=torch.get_num_threads(),
                cpu_flags=flags, options=options)


def default_references(models):
    """Per family (Swin, PVT, CSwin: :data:`~.names.FAMILIES`), the first model of another library among ``models``
    (names), else the family's first model."""
    refs = {}
    for name in models:
        current = refs.get(name.family)
        if current is None or (current.ours and not name.ours):
            refs[name.family] = name
    return list(refs.values())


def add_ratios(rows, references):
    """``speedup_over_fp32`` (the same model's fp32 latency over this one) of every row; ``reference`` and
    ``ratio_to_reference`` (latency over the reference's in the same setting) of every row, the reference being the
    model of ``references`` (names) of the row's own family, else the first of ``references``."""
    latency = {(r['model'], *(r[k] for k in SETTING)): r['latency_ms'] for r in rows if r.get('latency_ms')}
    by_family = {}
    for name in references:
        by_family.setdefault(name.family, str(name))
    for r in rows:
        r['reference'] = by_family.get(parse(r['model']).family, str(references[0]))
        if not r.get('latency_ms'):
            continue
        fp32 = latency.get((r['model'], *(r[k] if k != 'dtype' else 'fp32' for k in SETTING)))
        r['speedup_over_fp32'] = fp32 / r['latency_ms'] if fp32 else None
        ref = latency.get((r['reference'], *(r[k] for k in SETTING)))
        r['ratio_to_reference'] = r['latency_ms'] / ref if ref else None


# --- saved results -------------------------------------------------------------------------------------------------

def _highres_name(name, task):
    """A model name of tools/benchmark_highres.py (bare names were mmdet's, mmseg's in UperNet, timm's windows)."""
    if re.fullmatch(r'swin-t-w\d+', name):
        return f'timm:{name}'
    if re.fullmatch(r'swin-[tsb]|pvt-[tsml]', name):
        return f'{"mmseg" if task == "upernet" else "mmdet"}:{name}'
    return name


def _gpu_name(name):
    """A model name of tools/benchmark_gpu.py (bare swin-t and pvt-v2-b1 were timm's; a padding-aware twin was
    'NAME (padding-aware)')."""
    if name in ('swin-t', 'pvt-v2-b1'):
        return f'timm:{name}'
    base, twin, _ = name.partition(' (padding-aware)')
    if twin:
        model, _, path = base.partition('@')
        return f'{model}-pa' + (f'@{path}' if path else '')
    return name


def _number(value):
    """A saved number, None for not measured (NaN, null)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _from_highres(meta, rows):
    task = meta.get('task', 'backbone')
    command = meta.get('command', '').split()
    reference = command[command.index('--reference') + 1] if '--reference' in command else \
        f'swin-t-w{meta["window_sizes"][0]}' if meta.get('window_sizes') else 'swin-t'
    out = []
    for r in rows:
        row = {k: _number(r.get(k)) for k in COLUMNS}
        row.update(model=_highres_name(r['model'], task), step='infer', reference=_highres_name(reference, task),
                   capture='compile' if meta.get('compile') else '', run=0, note=r.get('note') or '')
        out.append(row)
    machine = meta.get('processor', meta.get('device'))
    return dict(meta, machine=machine), out


def _from_gpu(meta, rows):
    """Its rows; the runs that the device script appended into one file are told apart (a new run starts where a
    model's setting comes again)."""
    out, seen, run = [], set(), 0
    for r in rows:
        size = f'{r["size"]}x{r["size"]}'
        setting = (r['model'], r['size'], r['batch'], r['dtype'], r['train'], r['compiled'])
        if setting in seen:
            run, seen = run + 1, set()
        seen.add(setting)
        out.append({**dict.fromkeys(COLUMNS), **dict(
            run=run, model=_gpu_name(r['model']), size=size, pixels=r['size'] ** 2, batch=r['batch'], dtype=r['dtype'],
            device=meta['args']['device'], step='train' if r['train'] else 'infer', capture=r['compiled'] or '',
            latency_ms=r['median_ms'], min_ms=r['min_ms'], max_ms=r['max_ms'],
            images_per_s=r['batch'] * 1e3 / r['median_ms'], reference=_gpu_name(r['reference']),
            ratio_to_reference=r['ratio'], launches=r['launches'], peak_memory_mb=r['peak_mb'], note='')})
    return dict(meta, machine=meta['device'], device=meta['args']['device']), out


def read_results(path):
    """``(metas, rows)`` of a saved results.json (the metas of the runs it holds): this tool's, or
    tools/benchmark_highres.py's or tools/benchmark_gpu.py's (rows and names translated to this tool's)."""
    with open(path) as f:
        saved = json.load(f)
    meta, rows = saved['meta'], saved['results']
    if rows and 'median_ms' in rows[0]:
        meta, rows = _from_gpu(meta, rows)
    elif rows and 'step' not in rows[0]:
        meta, rows = _from_highres(meta, rows)
    else:
        rows = [{k: _number(r.get(k)) for k in COLUMNS} | dict(run=r.get('run', 0)) for r in rows]
    return meta.get('merged', [meta]), rows


# --- the report ----------------------------------------------------------------------------------------------------

def _ms(value):
    return f'{value:.2f}' if value < 100 else f'{value:.1f}' if value < 1000 else f'{value:.0f}'


def _caption(metas, rows):
    runs = dict.fromkeys(f'{m.get("machine")}, torch {m.get("torch")}'
                         + (f', {m["threads"]} threads' if m.get('device') == 'cpu' and m.get('threads') else '')
                         for m in metas)
    same = [f'batch {rows[0]["batch"]}' if len({r['batch'] for r in rows}) == 1 else '',
            rows[0]['dtype'] if len({r['dtype'] for r in rows}) == 1 else '',
            {'infer': 'inference', 'train': 'training step'}[rows[0]['step']] if len({r['step'] for r in rows}) == 1
            else '',
            rows[0]['capture'] if len({r['capture'] for r in rows}) == 1 else '']
    return '; '.join(runs) + ''.join(f', {s}' for s in same if s)


def markdown_table(rows):
    """The rows as a Markdown table; a column only where some row has it, the setting's columns only where they
    vary (the caption says the rest)."""
    timed = [r for r in rows if r.get('latency_ms')]
    varying = [k for k in ('run', 'batch', 'dtype', 'step', 'capture') if len({r[k] for r in rows}) > 1]
    refs = {r['reference'] for r in timed if r.get('ratio_to_reference')}
    has = {k for k in COLUMNS if any(r.get(k) is not None for r in timed)}
    lead = ['size', *varying] if 'run' not in varying else ['run', 'size', *varying[1:]]
    cols = [*((k, lambda r, k=k: str(r[k])) for k in lead),
            ('model', lambda r: r['model']),
            ('latency ms (min-max)', lambda r: f'{_ms(r["latency_ms"])} ({_ms(r["min_ms"])}-{_ms(r["max_ms"])})'),
            ('img/s', lambda r: f'{r["images_per_s"]:.2f}')]
    optional = [('launches', 'launches', lambda v: f'{v}'), ('peak MB', 'peak_memory_mb', lambda v: f'{v:.0f}'),
                ('GFLOPs', 'gflops', lambda v: f'{v:.1f}'), ('GFLOP/s', 'achieved_gflops_per_s', lambda v: f'{v:.0f}'),
                ('%GEMM', 'gemm_fraction', lambda v: f'{100 * v:.0f}%')]
    cols += [(title, lambda r, k=key, f=fmt: '' if r.get(k) is None else f(r[k])) for title, key, fmt in optional
             if key in has]
    if refs:
        title = f'x {next(iter(refs))}' if len(refs) == 1 else 'x ref'
        cols.append((title, lambda r: '' if r.get('ratio_to_reference') is None else f'{r["ratio_to_reference"]:.2f}'))
        if len(refs) > 1:
            cols.append(('ref', lambda r: r['reference'] or ''))
    if any(r.get('speedup_over_fp32') is not None and r['dtype'] != 'fp32' for r in timed):
        cols.append(('fp32/this', lambda r: '' if r.get('speedup_over_fp32') is None else
                     f'{r["speedup_over_fp32"]:.2f}'))
    lines = ['| ' + ' | '.join(title for title, _ in cols) + ' |', '|' + '---|' * len(cols)]
    for r in rows:
        if r.get('latency_ms'):
            lines.append('| ' + ' | '.join(fmt(r) for _, fmt in cols) + ' |')
        else:
            cells = [*(str(r[k]) for k in lead), r['model'], r['note']]
            lines.append('| ' + ' | '.join(cells + [''] * (len(cols) - len(cells))) + ' |')
    return '\n'.join(lines)


def series(rows):
    """Timed rows grouped by :data:`SERIES` (model, run, batch, mode, step, capture), sorted by pixels."""
    groups = {}
    for r in rows:
        if r.get('latency_ms'):
            groups.setdefault(tuple(r[k] for k in SERIES), []).append(r)
    return {key: sorted(group, key=lambda r: r['pixels']) for key, group in groups.items()}


def exponents(rows):
    """Lines 'latency ~ pixels^k' (least-squares slope of log latency against log pixels) for each series over two
    sizes or more that span at least twice the pixels."""
    lines, runs = [], {r['run'] for r in rows}
    for (model, run, batch, dtype, step, capture), group in series(rows).items():
        if group[-1]['pixels'] >= 2 * group[0]['pixels']:
            slope = np.polyfit(np.log([r['pixels'] for r in group]), np.log([r['latency_ms'] for r in group]), 1)[0]
            what = ', '.join(s for s in (f'run {run}' if len(runs) > 1 else '', f'batch {batch}', dtype,
                                         'training step' if step == 'train' else '', capture) if s)
            lines.append(f'{model} ({what}): latency ~ pixels^{slope:.2f} over {group[0]["size"]}..{group[-1]["size"]}')
    return lines


def window_sweep(rows):
    """Per window size ``w`` (and setting): timm:swin-t-w{w} and inline-swin-t-w{w} side by side, the speed-up of
    InLine (Swin-T's latency over InLine-Swin-T's, same rounds) and the paper's GPU speed-up."""
    per = {(r['model'], *(r[k] for k in SETTING)): r for r in rows if r.get('latency_ms')}
    out = []
    for (model, *setting), swin in per.items():
        match = re.fullmatch(r'timm:swin-t-w(\d+)', model)
        inline = per.get((f'inline-swin-t-w{match.group(1)}', *setting)) if match else None
        if inline:
            out.append(dict(window=int(match.group(1)), **dict(zip(SETTING, setting, strict=True)),
                            swin_images_per_s=swin['images_per_s'], swin_gflops=swin.get('gflops'),
                            inline_images_per_s=inline['images_per_s'], inline_gflops=inline.get('gflops'),
                            speedup=swin['latency_ms'] / inline['latency_ms'],
                            paper_speedup=PAPER_WINDOW_SPEEDUP.get(int(match.group(1)))))
    return out


def window_table(sweep):
    lines = ['| window | size | batch | dtype | timm:swin-t-w{w} img/s | GFLOPs | inline-swin-t-w{w} img/s | GFLOPs '
             '| speed-up | paper (GPU) |', '|' + '---|' * 10]
    for s in sweep:
        flops = ['' if v is None else f'{v:.1f}' for v in (s['swin_gflops'], s['inline_gflops'])]
        paper = '' if s['paper_speedup'] is None else f'{s["paper_speedup"]}x'
        lines.append(f'| {s["window"]} | {s["size"]} | {s["batch"]} | {s["dtype"]} | {s["swin_images_per_s"]:.1f} | '
                     f'{flops[0]} | {s["inline_images_per_s"]:.1f} | {flops[1]} | {s["speedup"]:.2f}x | {paper} |')
    return '\n'.join(lines)


def markdown(metas, rows):
    """The whole report: caption, table, latency exponents, window sweep."""
    parts = [_caption(metas, rows), markdown_table(rows)]
    lines = exponents(rows)
    if lines:
        parts.append('\n'.join(f'* {line}' for line in lines))
    sweep = window_sweep(rows)
    if sweep:
        parts.append(window_table(sweep))
    return '\n\n'.join(parts) + '\n'


def write(out_dir, metas, rows):
    """results.json, results.csv, results.md, latency_memory.png (and window_sizes.png for a window sweep)."""
    os.makedirs(out_dir, exist_ok=True)
    meta = metas[0] if len(metas) == 1 else dict(merged=metas)   # read back by read_results
    with open(osp.join(out_dir, 'results.json'), 'w') as f:
        json.dump(dict(meta=meta, results=rows), f, indent=1)
    with open(osp.join(out_dir, 'results.csv'), 'w', newline='') as f:
        writer = csv.DictWriter(f, COLUMNS, extrasaction='ignore')
        writer.writeheader()
        writer.writerows({k: '' if r.get(k) is None else r[k] for k in COLUMNS} for r in rows)
    with open(osp.join(out_dir, 'results.md'), 'w') as f:
        f.write(markdown(metas, rows))
    title = _caption(metas, rows)
    written = ['results.json', 'results.csv', 'results.md']
    if plots.latency_memory(osp.join(out_dir, 'latency_memory.png'), series(rows), SERIES, title):
        written.append('latency_memory.png')
    sweep = window_sweep(rows)
    if sweep:
        plots.window_sizes(osp.join(out_dir, 'window_sizes.png'), sweep, PAPER_WINDOW_SPEEDUP, title)
        written.append('window_sizes.png')
    return [osp.join(out_dir, name) for name in written]
