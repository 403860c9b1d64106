"""The comparison's tables, one per question, in Markdown, from :func:`.compare_run.summarize`'s rows (means over
images and heads per size, position and attention): negative weights, injectivity and collapse toward uniform,
locality and the local term, rank."""
from .compare import KINDS

NON_NEGATIVE = ('flatten', 'linear-relu', 'linear-exp', 'softmax')   # kinds whose weights are >= 0 by construction


def _fmt(value, spec):
    return '' if value is None else format(value, spec)


def _size(row):
    return 'x'.join(map(str, row['size']))


def _where(row):
    return f"| {_size(row)} | {row['position']} | {row['hw_shape'][0]}x{row['hw_shape'][1]} | {row['kind']} |"


def negative_table(summary):
    rows = [r for r in summary if r['kind'] == 'inline' or r.get('negative.negative_share')]
    zero = sorted({r['kind'] for r in summary if r['kind'] in NON_NEGATIVE and not r.get('negative.negative_share')},
                  key=KINDS.index)
    lines = ['| size | position | map | attention | A<0 | min N*A | output share of A<0 | mass share of A<0 |',
             '|---|---|---|---|---|---|---|---|']
    lines += [f"{_where(r)} {_fmt(r.get('negative.negative_share'), '.1%')} | "
              f"{_fmt(r.get('negative.min_scaled_weight'), '.2f')} | "
              f"{_fmt(r.get('negative.negative_output_share'), '.3f')} | "
              f"{_fmt(r.get('negative.negative_mass_share'), '.3f')} |" for r in rows]
    note = (f"\n{', '.join(zero)}: no negative weight measured (non-negative by construction).\n" if zero else '')
    return '\n'.join(lines) + '\n' + note


def injectivity_table(summary):
    lines = ['| size | position | map | attention | confused pairs | median pair TV | mean TV to uniform |',
             '|---|---|---|---|---|---|---|']
    lines += [f"{_where(r)} {_fmt(r.get('injectivity.confused_share'), '.3f')} | "
              f"{_fmt(r.get('injectivity.tv_median'), '.3g')} | {_fmt(r.get('uniformity.tv_uniform_mean'), '.3g')} |"
              for r in summary]
    return '\n'.join(lines) + '\n'


def locality_table(summary):
    lines = ['| size | position | map | attention | 3x3 mass / uniform | 7x7 mass / uniform | '
             '\\|local\\| / \\|A v\\| |',
             '|---|---|---|---|---|---|---|']
    lines += [f"{_where(r)} {_fmt(r.get('locality.ratio_3x3'), '.2f')} | {_fmt(r.get('locality.ratio_7x7'), '.2f')} | "
              f"{_fmt(r.get('local_to_attention_norm'), '.2f')} |" for r in summary]
    return '\n'.join(lines) + '\n'


def rank_table(summary, rtols):
    ranked = [r for r in summary if any(k.startswith('rank.') for k in r)]
    if not ranked:
        return 'No map small enough for the N x N ranks (--rank-max-tokens).\n'
    head = ' | '.join(f'rank A (rtol {t:g}) | rank A + local (rtol {t:g}, mean / min)' for t in rtols)
    lines = [f'| size | position | map | attention | N | d | {head} |',
             '|---|---|---|---|---|---|' + '---|---|' * len(rtols)]
    for r in ranked:
        cells = []
        for t in rtols:
            local = r.get(f'rank.rank_A_plus_local@{t:g}')
            cells += [_fmt(r.get(f'rank.rank_A@{t:g}'), '.1f'),
                      '' if local is None else f"{local:.1f} / {r[f'rank.min_rank_A_plus_local@{t:g}']:.0f}"]
        lines.append(f"{_where(r)} {r['num_tokens']} | {r['head_dims']} | {' | '.join(cells)} |")
    return '\n'.join(lines) + '\n'


def markdown(summary, settings):
    """The four tables with their headings and the settings they were measured with."""
    rtols = tuple(settings.get('rank_rtols', (1e-6, 1e-3)))
    intro = (f"{settings.get('num_queries')} sampled queries per head, {settings.get('num_pairs')} random pairs "
             f"besides the nearest ones, seed {settings.get('seed')}; means over images and heads (min N*A: mean of "
             f"the per-head sample minima); ranks where N <= {settings.get('rank_max_tokens')}, of A + local for the "
             f"first {settings.get('rank_channels')} channels of each head.\n")
    return '\n'.join([intro, '### Negative weights\n', negative_table(summary),
                      '### Injectivity and collapse toward uniform\n', injectivity_table(summary),
                      '### Locality and the local term\n', locality_table(summary),
                      '### Rank\n', rank_table(summary, rtols)])
