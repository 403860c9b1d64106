"""The side-by-side comparison over images and sizes: both backbones run on each image at each size, every position
(stage, block) where either has a layer to compare (:mod:`.compare`), one result per (image, size, position,
attention), their means over images and heads (:func:`summarize`), written as JSON and CSV.

Outputs in ``out_dir``: ``compare_stats.json`` (settings, summary, per-head results), ``compare_stats.csv`` (one row
per image, size, position, attention and head), the tables (:mod:`.compare_report`, ``compare_tables.md``) and one
figure per question (:mod:`.compare_plots`).
"""
import csv
import json
import math
import os
import os.path as osp
import time
from collections import defaultdict

from ..models.mixers.flatten_attention import FocusedLinearAttention
from ..models.mixers.inline.attention import InLineAttention
from . import compare_plots, compare_report
from .capture import attention_layers, capture_layer_inputs
from .compare import KINDS, compare_flatten_layer, compare_inline_layer
from .inputs import load_image
from .report import scalar_stats

# model -> (its mixer type, the per-layer comparison)
MODELS = {'inline': (InLineAttention, compare_inline_layer), 'flatten': (FocusedLinearAttention, compare_flatten_layer)}


def _flatten_stats(head):
    flat = scalar_stats(head)
    for key, value in head.get('rank', {}).items():
        flat[f'rank.{key}'] = value
    return flat


def compare_image(backbones, image, settings):
    """Results of one image tensor: ``[{position, stage, block, hw_shape, num_tokens, head_dims, kind, model,
    heads}]`` for every layer of ``backbones`` (``{'inline': backbone, 'flatten': backbone}``, either may be left
    out)."""
    results = []
    for model, backbone in backbones.items():
        mixer_type, compare = MODELS[model]
        layers = attention_layers(backbone, mixer_type)
        if not layers:
            raise ValueError(f'the {model} backbone has no {mixer_type.__name__} layer (attn_type '
                             f'{getattr(backbone, "attn_type", "?")!r})')
        for record in capture_layer_inputs(backbone, image, layers):
            stage, block = int(record.name.split('.')[1]), int(record.name.split('.')[3])
            for kind, heads in compare(record, settings).items():
                results.append(dict(position=f'stage {stage} block {block}', stage=stage, block=block, model=model,
                                    kind=kind, hw_shape=list(record.hw_shape), num_tokens=record.tokens.shape[0],
                                    head_dims=record.module.head_dims, heads=heads))
    return results


def summarize(entries):
    """Per (size, position, attention): the mean over images and heads of every scalar (None left out)."""
    values, meta = defaultdict(lambda: defaultdict(list)), {}
    for entry in entries:
        key = (tuple(entry['size']), entry['stage'], entry['block'], entry['kind'])
        meta.setdefault(key, {k: entry[k] for k in ('size', 'position', 'stage', 'block', 'kind', 'model',
                                                     'hw_shape', 'num_tokens', 'head_dims')})
        for head in entry['heads']:
            for name, value in _flatten_stats(head).items():
                if value is not None:
                    values[key][name].append(value)
    order = sorted(values, key=lambda k: (k[0][0] * k[0][1], k[1], k[2], KINDS.index(k[3])))
    return [dict(meta[key], **{name: math.fsum(v) / len(v) for name, v in values[key].items()}) for key in order]


def write_csv(path, entries):
    rows = [{'image': e['image'], 'size': 'x'.join(map(str, e['size'])), 'position': e['position'], 'kind': e['kind'],
             'num_tokens': e['num_tokens'], 'head': head_index, **_flatten_stats(head)}
            for e in entries for head_index, head in enumerate(e['heads'])]
    fields = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def compare_attention(backbones, image_paths, sizes, settings, out_dir, norms, meta=None, progress=None):
    """Compare the attentions of ``backbones`` on each image resized to each of ``sizes`` ((H, W) pairs); ``norms``:
    each model's input normalisation. ``progress(message)``, if given, hears of each image, size and model done, and
    of the writing. Writes the files; returns the JSON data."""
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    steps = len(image_paths) * len(sizes) * len(backbones)
    for i, path in enumerate(image_paths):
        for j, size in enumerate(sizes):
            for k, (model, backbone) in enumerate(backbones.items()):
                start = time.perf_counter()
                _, tensor = load_image(path, norms[model], size)
                results = compare_image({model: backbone}, tensor, settings)
                entries += [dict(result, image=path, size=list(size)) for result in results]
                if progress is not None:
                    step = (i * len(sizes) + j) * len(backbones) + k + 1
                    progress(f'{step}/{steps}: {osp.basename(path)} at {size[0]}x{size[1]}, {model}: '
                             f'{len(results)} results in {time.perf_counter() - start:.1f} s')
    if progress is not None:
        progress(f'writing the statistics, tables and figures to {out_dir}')
    summary = summarize(entries)
    data = dict(settings=dict(settings.as_dict(), **(meta or {})), summary=summary, results=entries)
    with open(osp.join(out_dir, 'compare_stats.json'), 'w') as f:
        json.dump(data, f, indent=1)
    write_csv(osp.join(out_dir, 'compare_stats.csv'), entries)
    with open(osp.join(out_dir, 'compare_tables.md'), 'w') as f:
        f.write(compare_report.markdown(summary, data['settings']))
    compare_plots.plot_all(out_dir, summary, data['settings'])
    return data
