"""The suite's time budget, checked on every run (a pytest plugin; conftest.py loads it).

Budgets (``pyproject.toml`` ``[tool.pytest.ini_options]``, seconds of pytest's own wall time, set for the slowest
2-core CPU the suite runs on; docs/testing.md gives the measurements behind them):

* each test: a normal one ``time_budget_test`` (setup + call + teardown; a module or session fixture's first user
  pays its setup), a ``slow`` one ``time_budget_slow_test``;
* the run: the whole suite ``time_budget_suite``, the fast part (``-m 'not slow'``) ``time_budget_fast``, or
  ``--time-budget=SECONDS`` for any other selection (CI's second OpenMMLab line). A run of some files or ``-k``
  has no run budget unless it is given.

Every run ends with a "time budget" section: the run's time against its budget and the tests over theirs, slowest
first (offenders are listed, never failed: one test's time swings with the machine). With ``--time-budget-fail``
(CI passes it) a run more than ``time_budget_tolerance`` (a fraction) over its budget fails: a clear regression, not
noise. Tests that failed or were skipped are listed but still count: their time was spent.
"""
import time

import pytest

SLOW = 'slow'


def pytest_addoption(parser):
    group = parser.getgroup('time budget')
    group.addoption('--time-budget', type=float, default=None, metavar='SECONDS',
                    help='the budget of this run in seconds (default: from the selection, see tests/time_budget.py)')
    group.addoption('--time-budget-fail', action='store_true',
                    help='fail the run when it exceeds its budget by more than time_budget_tolerance')
    for name, default, what in (
            ('time_budget_test', '2', 'seconds a normal test may take (setup + call + teardown)'),
            ('time_budget_slow_test', '60', 'seconds a slow-marked test may take'),
            ('time_budget_suite', '900', 'seconds the whole suite may take'),
            ('time_budget_fast', '300', "seconds the fast part (-m 'not slow') may take"),
            ('time_budget_tolerance', '0.2', 'fraction over the run budget that --time-budget-fail fails')):
        parser.addini(name, what, default=default)


def run_budget(config):
    """The run's budget in seconds and what it is for, or ``(None, reason)`` when the selection has none."""
    if config.getoption('time_budget') is not None:
        return config.getoption('time_budget'), '--time-budget'
    # no paths given (pytest's testpaths or the invocation directory), or exactly the testpaths
    testpaths = {(config.rootpath / path).resolve() for path in config.getini('testpaths')}
    whole = config.args_source != pytest.Config.ArgsSource.ARGS or all(
        (config.invocation_params.dir / arg).resolve() in testpaths for arg in config.args)
    if config.getoption('keyword') or not whole:
        return None, 'a partial run (files or -k) has no run budget unless --time-budget is given'
    markexpr = ' '.join(config.getoption('markexpr').split())
    if not markexpr:
        return float(config.getini('time_budget_suite')), 'the whole suite'
    if markexpr == f'not {SLOW}':
        return float(config.getini('time_budget_fast')), f"the fast part (-m 'not {SLOW}')"
    return None, f"-m '{markexpr}' has no run budget unless --time-budget is given"


def offenders(spent, slow, test_budget, slow_budget):
    """``(nodeid, seconds, budget)`` of every test over its budget, slowest first."""
    over = [(nodeid, seconds, slow_budget if nodeid in slow else test_budget) for nodeid, seconds in spent.items()]
    return sorted([o for o in over if o[1] > o[2]], key=lambda o: -o[1])


def verdict(elapsed, budget, tolerance):
    """``'within'``, ``'over'`` (over the budget, within the tolerance) or ``'regression'``."""
    if budget is None or elapsed <= budget:
        return 'within'
    return 'over' if elapsed <= budget * (1 + tolerance) else 'regression'


class TimeBudget:
    """Times every test's phases and the run; reports and judges them at the end."""

    def __init__(self, config):
        self.config = config
        self.start = time.perf_counter()
        self.spent, self.slow = {}, set()
        self.elapsed = self.budget = self.verdict = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self):
        self.start = time.perf_counter()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        self.slow = {item.nodeid for item in items if item.get_closest_marker(SLOW)}

    def pytest_runtest_logreport(self, report):
        self.spent[report.nodeid] = self.spent.get(report.nodeid, 0.) + report.duration

    def pytest_sessionfinish(self, session, exitstatus):
        """Runs before the terminal summary is written (the terminal reporter wraps this hook)."""
        self.elapsed = time.perf_counter() - self.start
        self.budget, self.what = run_budget(self.config)
        self.tolerance = float(self.config.getini('time_budget_tolerance'))
        self.verdict = verdict(self.elapsed, self.budget, self.tolerance)
        if self.verdict == 'regression' and self.config.getoption('time_budget_fail') \
                and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        config, tr = self.config, terminalreporter
        test_budget = float(config.getini('time_budget_test'))
        slow_budget = float(config.getini('time_budget_slow_test'))
        tr.section('time budget')
        if self.budget is None:
            tr.write_line(f'run: {self.elapsed:.0f} s ({self.what})')
        else:
            tr.write_line(f'run: {self.elapsed:.0f} s of {self.budget:.0f} s for {self.what} '
                          f'({100 * self.elapsed / self.budget:.0f}%): {self.verdict}')
            if self.verdict == 'regression':
                failing = ' (--time-budget-fail: the run fails)' if config.getoption('time_budget_fail') else ''
                tr.write_line(f'the run is more than {100 * self.tolerance:.0f}% over its budget{failing}: the '
                              'slowest tests below, and --durations, say where the time went', red=True)
        over = offenders(self.spent, self.slow, test_budget, slow_budget)
        tr.write_line(f'tests over their budget (normal {test_budget:g} s, {SLOW} {slow_budget:g} s): {len(over)}'
                      + (f', {sum(s for _, s, _ in over):.0f} s in all' if over else ''))
        for nodeid, seconds, limit in over[:40]:
            tr.write_line(f'  {seconds:7.1f} s  (budget {limit:g} s)  {nodeid}')
        if len(over) > 40:
            tr.write_line(f'  ... and {len(over) - 40} more')


def pytest_configure(config):
    config.pluginmanager.register(TimeBudget(config), 'time_budget_run')
