"""The suite's time budget (tests/time_budget.py): the run and each test against their budgets, offenders listed,
the run failed only with ``--time-budget-fail`` and only past the tolerance; run in-process on a small generated
suite (pytest's ``pytester``)."""
import pytest
from time_budget import offenders, verdict

pytest_plugins = ['pytester']

SUITE = """
import time
import pytest

def test_quick():
    pass

def test_over_the_normal_budget():
    time.sleep(0.3)

@pytest.mark.slow
def test_slow_within_its_budget():
    time.sleep(0.3)
"""
INI = """
[pytest]
markers = slow: slow
time_budget_test = 0.2
time_budget_slow_test = 1
time_budget_suite = {suite}
time_budget_fast = 0.001
"""


def suite(pytester, budget):
    pytester.makeconftest("pytest_plugins = ['time_budget']")
    pytester.makeini(INI.format(suite=budget))
    pytester.makepyfile(test_generated=SUITE)


def test_verdict_and_offenders():
    assert verdict(10, 10, 0.2) == 'within' and verdict(11.9, 10, 0.2) == 'over'
    assert verdict(12.1, 10, 0.2) == 'regression' and verdict(1e9, None, 0.2) == 'within'
    spent = {'a': 3., 'b': 1., 'c': 61., 'd': 59.}
    assert offenders(spent, {'c', 'd'}, 2, 60) == [('c', 61., 60), ('a', 3., 2)]


def test_offenders_are_listed_and_a_run_over_its_budget_passes_without_the_flag(pytester):
    suite(pytester, 0.05)
    result = pytester.runpytest_inprocess('-p', 'no:cacheprovider')
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    result.stdout.fnmatch_lines(['*time budget*', 'run: * s of 0 s for the whole suite (*%): regression',
                                 'tests over their budget (normal 0.2 s, slow 1 s): 1, * s in all',
                                 '*(budget 0.2 s)  test_generated.py::test_over_the_normal_budget'])
    assert 'test_slow_within_its_budget' not in result.stdout.str().split('time budget')[1]


def test_fail_flag_fails_a_clear_regression_only(pytester):
    suite(pytester, 0.05)
    result = pytester.runpytest_inprocess('-p', 'no:cacheprovider', '--time-budget-fail')
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(['*more than 20% over its budget (--time-budget-fail: the run fails)*'])
    result = pytester.runpytest_inprocess('-p', 'no:cacheprovider', '--time-budget-fail', '--time-budget', '60')
    assert result.ret == 0
    result.stdout.fnmatch_lines(['run: * s of 60 s for --time-budget (*%): within'])


def test_the_selection_picks_the_budget(pytester):
    suite(pytester, 60)
    fast = pytester.runpytest_inprocess('-p', 'no:cacheprovider', '-m', 'not slow', '--time-budget-fail')
    fast.stdout.fnmatch_lines(["run: * s of 0 s for the fast part (-m 'not slow') (*%): regression"])
    assert fast.ret == pytest.ExitCode.TESTS_FAILED
    partial = pytester.runpytest_inprocess('-p', 'no:cacheprovider', '-k', 'quick', '--time-budget-fail')
    partial.stdout.fnmatch_lines(['run: * s (a partial run (files or -k) has no run budget unless --time-budget is '
                                  'given)'])
    assert partial.ret == 0
    marked = pytester.runpytest_inprocess('-p', 'no:cacheprovider', '-m', 'slow')
    marked.stdout.fnmatch_lines(["run: * s (-m 'slow' has no run budget unless --time-budget is given)"])
