"""Pictures of the attention analysis (matplotlib, Agg): query maps, per-layer summary, pair scatter.
Saved as palette PNGs (128 colours) to keep them small."""
import io

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402
from PIL import Image  # noqa: E402

DPI = 72


def _save(fig, path):
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=DPI, format='png')
    plt.close(fig)
    buffer.seek(0)
    Image.open(buffer).convert('RGB').quantize(colors=128).save(path, optimize=True)


def finish_panel(ax, title, x, names, log=False):
    """A line panel's common dress: log scale if ``log``, ``title``, the entries ``names`` at ``x`` as tick labels,
    the legend and a light grid."""
    if log:
        ax.set_yscale('log')
    ax.set_title(title, fontsize=9)
    ax.set_xticks(x, names, rotation=60, fontsize=7)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def plot_query_maps(path, image, points, maps, title):
    """For each query point (x, y in pixels): the image with the point, then ``N A_i`` of InLine and of
    linear attention over the image (maps (P, H, W) each; 1 = uniform weight, blue = negative)."""
    rows = len(points)
    fig, axes = plt.subplots(rows, 3, figsize=(7.5, 2.5 * rows), squeeze=False)
    extent = (0, image.shape[1], image.shape[0], 0)
    for r, (x, y) in enumerate(points):
        axes[r, 0].imshow(image)
        for kind, col in (('inline', 1), ('linear', 2)):
            m = maps[kind][r].numpy()
            lo, hi = min(m.min(), 0.999), max(m.max(), 1.001)
            im = axes[r, col].imshow(m, cmap='RdBu_r', norm=TwoSlopeNorm(1.0, lo, hi), extent=extent)
            fig.colorbar(im, ax=axes[r, col], fraction=0.046, pad=0.02)
            axes[r, col].set_title(f'{"InLine" if kind == "inline" else "linear"}: N*A, min {m.min():.2f}',
                                   fontsize=8)
        for ax in axes[r]:
            ax.plot([x], [y], marker='x', color='k', markersize=8, mew=2)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def plot_layer_summary(path, summary, title):
    """Per layer (mean over heads and images): negative weights, locality, residual share, confusion."""
    names = [row['layer'].replace('layers.', 'L').replace('.blocks.', 'b').replace('.attn', '') for row in summary]
    x = np.arange(len(names))

    def col(key):
        return np.array([row.get(key, np.nan) if row.get(key) is not None else np.nan for row in summary], float)

    panels = [
        ('negative weights (InLine)', [('share of A<0', 'negative.negative_share'),
                                       ('output share', 'negative.negative_output_share')], False),
        ('min N*A (InLine, sampled rows)', [('min N*A', 'negative.min_scaled_weight')], False),
        ('3x3 mass / uniform share', [('InLine', 'locality_inline.ratio_3x3'),
                                      ('linear', 'locality_linear.ratio_3x3')], False),
        ('|3x3 residual| / |attention|', [('ratio', 'residual_to_attention_norm')], False),
        ('confused pairs (cos<0.99, TV<1e-3)', [('InLine', 'injectivity_inline.confused_share'),
                                                ('linear', 'injectivity_linear.confused_share')], False),
        ('median TV of pairs', [('InLine', 'injectivity_inline.tv_median'),
                                ('linear', 'injectivity_linear.tv_median')], True),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(11, 5.5))
    for ax, (panel, series, log) in zip(axes.flat, panels, strict=False):
        for label, key in series:
            ax.plot(x, col(key), marker='o', label=label)
        finish_panel(ax, panel, x, names, log)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def plot_pair_scatter(path, layers, title):
    """TV of the two rows against the cosine of the two queries, per layer (heads and images pooled).
    ``layers``: list of (name, cosine, tv_inline, tv_linear) arrays."""
    cols = min(4, len(layers))
    rows = -(-len(layers) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 2.6 * rows), squeeze=False)
    for ax, (name, cosine, tv_inline, tv_linear) in zip(axes.flat, layers, strict=False):
        ax.scatter(cosine, np.maximum(tv_linear, 1e-9), s=3, alpha=0.5, label='linear')
        ax.scatter(cosine, np.maximum(tv_inline, 1e-9), s=3, alpha=0.5, label='InLine')
        ax.axhline(1e-3, color='k', lw=0.5, ls='--')
        ax.axvline(0.99, color='k', lw=0.5, ls='--')
        ax.set_yscale('log')
        ax.set_title(name, fontsize=8)
        ax.set_xlabel('query cosine', fontsize=7)
        ax.set_ylabel('row TV', fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6, markerscale=3)
    for ax in list(axes.flat)[len(layers):]:
        ax.axis('off')
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)
