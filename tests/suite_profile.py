"""Where the suite's time goes, from pytest's JUnit XML (``pytest --junitxml=FILE``; each test's time is its setup,
call and teardown together): seconds per file and the slowest tests, of one run or of two side by side.

    .venv/bin/python tests/suite_profile.py before.xml [after.xml] [--top 30] [--markdown]

Not a test module (pytest collects ``test_*.py`` only); docs/testing.md's profile tables are its ``--markdown``
output.
"""
import argparse
import collections
import xml.etree.ElementTree as ET


def read(path):
    """``{'tests.test_x::test_y[...]': seconds}`` of every test case in a JUnit XML file."""
    return {f"{case.get('classname', '')}::{case.get('name')}": float(case.get('time', 0))
            for case in ET.parse(path).getroot().iter('testcase')}


def file_of(name):
    """``tests.test_x::test_y[...]`` -> ``test_x.py``."""
    return name.split('::')[0].rsplit('.', 1)[-1] + '.py'


def short(name):
    """``tests.test_x::test_y[a.py]`` -> ``test_x::test_y[a.py]`` (parameters may hold dots)."""
    module, test = name.split('::', 1)
    return f"{module.rsplit('.', 1)[-1]}::{test}"


def per_file(cases):
    files = collections.defaultdict(lambda: [0., 0])
    for name, seconds in cases.items():
        files[file_of(name)][0] += seconds
        files[file_of(name)][1] += 1
    return files


def table(rows, header, markdown):
    if markdown:
        lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
        lines += ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows]
    else:
        widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
        lines = ['  '.join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in [header, *rows]]
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('runs', nargs='+', help='one or two JUnit XML files (before, after)')
    parser.add_argument('--top', type=int, default=30)
    parser.add_argument('--markdown', action='store_true')
    args = parser.parse_args(argv)
    if len(args.runs) > 2:
        parser.error(f'one or two runs (before, after), got {len(args.runs)}')
    runs = [read(path) for path in args.runs]
    files = [per_file(run) for run in runs]
    totals = [sum(run.values()) for run in runs]
    print(' / '.join(f'{len(run)} tests, {total:.0f} s ({total / 60:.1f} min) in tests'
                     for run, total in zip(runs, totals, strict=True)))
    order = sorted(set().union(*files), key=lambda f: -max(fs.get(f, (0, 0))[0] for fs in files))
    header = ['file'] + [h for i in range(len(runs)) for h in (f'tests{" " + "AB"[i] if len(runs) > 1 else ""}',
                                                                f's{" " + "AB"[i] if len(runs) > 1 else ""}')]
    rows = [[f] + [v for fs in files for v in (fs.get(f, (0, 0))[1], f'{fs.get(f, (0, 0))[0]:.1f}')]
            for f in order[:args.top]]
    print(table(rows, header, args.markdown))
    print()
    slowest = sorted(runs[0].items(), key=lambda kv: -kv[1])[:args.top]
    header = ['test', 's' + (' A' if len(runs) > 1 else '')] + (['s B'] if len(runs) > 1 else [])
    rows = [[short(name), f'{seconds:.1f}'] + (
        [f'{runs[1][name]:.1f}' if name in runs[1] else 'gone'] if len(runs) > 1 else [])
        for name, seconds in slowest]
    print(table(rows, header, args.markdown))


if __name__ == '__main__':
    main()
