"""The benchmark's pictures: latency and peak memory against pixels (log-log), and the window sweep."""


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _label(key, keys, fields):
    """A series' label: its model, and the parts of its key (named by ``fields``) that differ between the series."""
    varying = [i for i in range(1, len(key)) if len({k[i] for k in keys}) > 1]
    return ' '.join([key[0], *(f'{fields[i]} {key[i]}' if fields[i] in ('run', 'batch') else str(key[i])
                               for i in varying)])


def _label_log_axis(axis, low, high):
    """Labelled ticks on a log ``axis`` whose view runs from ``low`` to ``high``, at least two of them inside the view
    however narrow it is: powers of ten, else 1-2-5 per decade, else 1-9 per decade, else four evenly spaced values;
    plain numbers (no offset), no minor labels."""
    from matplotlib.ticker import LogLocator, MaxNLocator, NullFormatter, ScalarFormatter

    for subs in ((1.0,), (1.0, 2.0, 5.0), tuple(range(1, 10))):
        locator = LogLocator(subs=subs, numticks=12)
        if sum(low <= t <= high for t in locator.tick_values(low, high)) >= 2:
            break
    else:
        locator = MaxNLocator(4)
    axis.set_major_locator(locator)
    axis.set_major_formatter(ScalarFormatter(useOffset=False))
    axis.set_minor_formatter(NullFormatter())


def latency_memory_figure(series, fields, title):
    """The figure of latency (and peak memory, where measured) against megapixels per image, log-log, one line per
    series (key: the values of ``fields``, the model first -> its rows by pixels), ticks labelled at any range of
    sizes and latencies (one size too); None if there is no series."""
    if not series:
        return None
    plt = _pyplot()
    panels = [('latency_ms', 1e-3, 'latency (s)')]
    if any(r.get('peak_memory_mb') for rows in series.values() for r in rows):
        panels.append(('peak_memory_mb', 1, 'peak memory of one call (MB)'))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (key, scale, label) in zip(axes[0], panels, strict=True):
        for name, rows in series.items():
            points = [r for r in rows if r.get(key)]
            if points:
                ax.plot([r['pixels'] / 1e6 for r in points], [r[key] * scale for r in points], 'o-',
                        label=_label(name, series, fields))
        ax.set_xscale('log')
        ax.set_yscale('log')
        _label_log_axis(ax.xaxis, *ax.get_xlim())
        _label_log_axis(ax.yaxis, *ax.get_ylim())
        ax.set_xlabel('megapixels per image')
        ax.set_ylabel(label)
        ax.grid(True, which='both', alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def latency_memory(path, series, fields, title):
    """Write :func:`latency_memory_figure` of the series to ``path``: True; False if there is no series."""
    fig = latency_memory_figure(series, fields, title)
    if fig is None:
        return False
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return True


def window_sizes(path, sweep, paper, title):
    """Images/s of both models and InLine-Swin-T's speed-up per window size (beside ``paper``'s: window -> speed-up),
    one line per setting."""
    plt = _pyplot()
    fig, (ax_fps, ax_ratio) = plt.subplots(1, 2, figsize=(11, 4.2))
    settings = {(s['size'], s['batch'], s['dtype']): [] for s in sweep}
    for s in sweep:
        settings[s['size'], s['batch'], s['dtype']].append(s)
    for setting, rows in settings.items():
        what = ' '.join(str(v) for v in setting) if len(settings) > 1 else ''
        windows = [r['window'] for r in rows]
        ax_fps.plot(windows, [r['swin_images_per_s'] for r in rows], 'o-', label=f'timm:swin-t-w{{w}} {what}')
        ax_fps.plot(windows, [r['inline_images_per_s'] for r in rows], 's-', label=f'inline-swin-t-w{{w}} {what}')
        ax_ratio.plot(windows, [r['speedup'] for r in rows], 'o-', label=f'measured {what}')
    ax_ratio.plot(sorted(paper), [paper[w] for w in sorted(paper)], 'k*--', label='paper Fig. 3 (GPU)')
    ax_ratio.axhline(1, color='grey', lw=0.8)
    ticks = sorted({s['window'] for s in sweep})
    for ax, label in ((ax_fps, 'images/s'), (ax_ratio, 'InLine-Swin-T / Swin-T images/s')):
        ax.set_xscale('log', base=2)
        ax.set_xticks(ticks, [str(w) for w in ticks])
        ax.set_xlabel('window size')
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
