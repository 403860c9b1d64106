"""The attention analysis of a backbone over images: statistics of every InLine layer, JSON/CSV, pictures.

Outputs in ``out_dir``: ``attention_stats.json`` (settings, per image/layer/head statistics and the
per-layer summary), ``attention_stats.csv`` (one row per image, layer and head), ``summary.png``
(per-layer plot), ``pairs.png`` (row TV against query cosine per layer) and ``maps_<image>_<layer>.png``
(query maps of InLine and linear attention) for the ``map_layers``.
"""
import os
import os.path as osp
import sys

import torch

from . import plots
from .capture import capture_inline_inputs
from .inputs import load_image, object_points, token_index
from .layer import analyze_layer
from .report import summarize_layers, write_csv, write_json


def last_layer_per_stage(records):
    """Names of the last InLine layer of each stage."""
    return list({record.stage: record.name for record in records}.values())


def _progress(items):
    """``items``, one line on stderr per item (``[i/n] name``)."""
    for i, item in enumerate(items, 1):
        print(f'[{i}/{len(items)}] {os.path.basename(str(item))}', file=sys.stderr, flush=True)
        yield item


def analyze_attention(backbone, image_paths, settings, out_dir, norm, size=None, resize=None, points=None,
                      num_points=3, map_layers=None, meta=None):
    """Analyse ``backbone`` on each image; ``points`` (x, y pixels) or ``num_points`` picked on objects
    are drawn for ``map_layers`` (default the last InLine layer of each stage). Returns the JSON data."""
    os.makedirs(out_dir, exist_ok=True)
    images, pairs = [], {}
    for path in _progress(list(image_paths)):
        rgb, tensor = load_image(path, norm, size, resize)
        records = capture_inline_inputs(backbone, tensor)
        names = [r.name for r in records]
        draw = last_layer_per_stage(records) if map_layers is None else map_layers
        unknown = sorted(set(draw) - set(names))
        if unknown:
            raise ValueError(f'map layers {unknown} are not InLine layers of the backbone; they are {names}')
        picked = points if points else object_points(rgb, num_points)
        layers = []
        stem = osp.splitext(osp.basename(path))[0]
        for record in records:
            drawn = record.name in draw
            idx = token_index(picked, rgb.shape[:2], record.hw_shape) if drawn else []
            result, layer_pairs, maps = analyze_layer(record, settings, idx)
            layers.append(result)
            pairs.setdefault(record.name, []).extend(layer_pairs)
            if drawn:
                plots.plot_query_maps(osp.join(out_dir, f'maps_{stem}_{record.name.replace(".", "_")}.png'),
                                      rgb, picked, maps, f'{stem} {record.name} ({record.hw_shape[0]}x'
                                      f'{record.hw_shape[1]} tokens), heads averaged')
        images.append(dict(image=path, input_hw=list(tensor.shape[-2:]), points=[list(p) for p in picked],
                           layers=layers))
    summary = summarize_layers(images)
    data = dict(settings=dict(settings.as_dict(), **(meta or {})), summary=summary, images=images)
    write_json(osp.join(out_dir, 'attention_stats.json'), data)
    write_csv(osp.join(out_dir, 'attention_stats.csv'), images)
    title = f'{len(images)} image(s), {settings.num_queries} sampled queries, seed {settings.seed}'
    plots.plot_layer_summary(osp.join(out_dir, 'summary.png'), summary, title)
    plots.plot_pair_scatter(osp.join(out_dir, 'pairs.png'),
                            [(name, *(torch.cat(parts).numpy() for parts in zip(*layer_pairs, strict=True)))
                             for name, layer_pairs in pairs.items()], title)
    return data

