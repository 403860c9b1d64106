"""The comparison's figures, one per question (matplotlib, Agg; palette PNGs through :func:`.plots._save`): each
attention a series over the (size, position) entries of :func:`.compare_run.summarize`, and the rows' distance to
uniform against the token count N."""
import numpy as np

from .compare import KINDS
from .plots import _save, finish_panel, plt

MARKERS = 'osv^D'   # one per attention (KINDS), drawn shrinking so that equal values stay visible


def _entries(summary):
    labels = list(dict.fromkeys((tuple(r['size']), r['stage'], r['block']) for r in summary))
    return labels, [f"{s[0]}x{s[1]} s{st}b{b}" for s, st, b in labels]


def _series(summary, labels, kind, key):
    by = {(tuple(r['size']), r['stage'], r['block']): r.get(key) for r in summary if r['kind'] == kind}
    return np.array([np.nan if by.get(label) is None else by[label] for label in labels], float)


def _panel(ax, summary, labels, names, key, title, kinds=KINDS, log=False):
    x = np.arange(len(labels))
    for kind in kinds:
        values = _series(summary, labels, kind, key)
        if not np.all(np.isnan(values)):
            index = KINDS.index(kind)
            ax.plot(x, values, marker=MARKERS[index], markersize=7 - index, color=f'C{index}', label=kind)
    finish_panel(ax, title, x, names, log)


def _figure(path, panels, summary, title):
    labels, names = _entries(summary)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    for ax, (key, panel_title, kwargs) in zip(axes[0], panels, strict=True):
        _panel(ax, summary, labels, names, key, panel_title, **kwargs)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def plot_uniformity(ax, summary):
    """Mean TV of the rows to uniform against N, per attention (colour) and stage (line style, marker; log N)."""
    styles = ['-o', '--s', ':^', '-.v']
    for colour, kind in enumerate(KINDS):
        for stage in sorted({r['stage'] for r in summary if r['kind'] == kind}):
            rows = sorted((r for r in summary if r['kind'] == kind and r['stage'] == stage and r['block'] == 0),
                          key=lambda r: r['num_tokens'])
            if rows:
                ax.plot([r['num_tokens'] for r in rows], [r.get('uniformity.tv_uniform_mean') for r in rows],
                        styles[stage % len(styles)], color=f'C{colour}', label=f'{kind} s{stage}')
    ax.set_xscale('log')
    ax.set_xlabel('tokens N', fontsize=8)
    ax.set_title('mean TV of rows to uniform (block 0)', fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)


def plot_all(out_dir, summary, settings):
    """Writes compare_negative.png, compare_injectivity.png, compare_locality.png, compare_rank.png to ``out_dir``."""
    title = (f"{settings.get('num_queries')} sampled queries per head, seed {settings.get('seed')}; "
             f"{settings.get('models', '')}" + (f" ({settings['random_init']} init)" if 'random_init' in settings
                                                else ''))
    _figure(f'{out_dir}/compare_negative.png', [
        ('negative.negative_share', 'share of A<0', {}),
        ('negative.negative_output_share', 'output share carried by A<0', {})], summary, title)
    labels, names = _entries(summary)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    _panel(axes[0], summary, labels, names, 'injectivity.confused_share', 'confused pairs (cos<0.99, TV<1e-3)')
    _panel(axes[1], summary, labels, names, 'injectivity.tv_median', 'median TV of query pairs', log=True)
    plot_uniformity(axes[2], summary)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, f'{out_dir}/compare_injectivity.png')
    _figure(f'{out_dir}/compare_locality.png', [
        ('locality.ratio_3x3', '3x3 mass / uniform share', {}),
        ('locality.ratio_7x7', '7x7 mass / uniform share', {}),
        ('local_to_attention_norm', '|local| / |A v|', dict(kinds=('inline', 'flatten')))], summary, title)
    rtols = settings.get('rank_rtols', (1e-6, 1e-3))
    _figure(f'{out_dir}/compare_rank.png', [
        *((f'rank.rank_A@{rtol:g}', f'rank of A (rtol {rtol:g})', dict(log=True)) for rtol in rtols),
        (f'rank.rank_A_plus_local@{min(rtols):g}', f'rank of A + local (rtol {min(rtols):g})',
         dict(kinds=('inline', 'flatten'), log=True))], summary, title)
