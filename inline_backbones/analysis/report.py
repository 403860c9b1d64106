"""Aggregate the per-layer, per-head statistics of :mod:`.layer` and write them as JSON and CSV."""
import csv
import json
import math
from collections import defaultdict


def scalar_stats(head):
    """The head's scalar statistics with dotted names (``negative.negative_share`` ...), lists left out."""
    flat = {}
    for key, value in head.items():
        if isinstance(value, dict):
            flat.update({f'{key}.{k}': v for k, v in value.items() if not isinstance(v, (list, dict))})
        elif key != 'head' and not isinstance(value, list):
            flat[key] = value
    return flat


def summarize_layers(images):
    """Per layer, the mean over images and heads of every scalar (``negative.min_scaled_weight``: the
    minimum); None values (no residual, no distinct pair) are left out of the means."""
    values = defaultdict(lambda: defaultdict(list))
    order = []
    for image in images:
        for layer in image['layers']:
            if layer['layer'] not in values:
                order.append(layer['layer'])
            for head in layer['heads']:
                for key, value in scalar_stats(head).items():
                    if value is not None:
                        values[layer['layer']][key].append(value)
    summary = []
    for name in order:
        row = {'layer': name}
        for key, vals in values[name].items():
            row[key] = min(vals) if key == 'negative.min_scaled_weight' else math.fsum(vals) / len(vals)
        summary.append(row)
    return summary


def write_csv(path, images):
    """One row per (image, layer, head) with every scalar statistic."""
    rows = [{'image': image['image'], 'layer': layer['layer'], 'hw_shape': 'x'.join(map(str, layer['hw_shape'])),
             'num_tokens': layer['num_tokens'], 'head': head['head'], **scalar_stats(head)}
            for image in images for layer in image['layers'] for head in layer['heads']]
    fields = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def write_json(path, data):
    with open(path, 'w') as f:
        json.dump(data, f, indent=1)
