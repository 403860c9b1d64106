"""tests/suite_profile.py: seconds per file and the slowest tests from pytest's JUnit XML, one run or two side by
side; parametrized ids with dots in them keep their names."""
import pytest
from suite_profile import main, per_file, read

XML = """<testsuites><testsuite>
<testcase classname="tests.test_a" name="test_one" time="3.0"/>
<testcase classname="tests.test_a" name="test_recipe[mmdet::swin/x_1x_coco.py]" time="5.5"><skipped/></testcase>
<testcase classname="tests.test_b" name="test_two" time="1.0"><failure/></testcase>
</testsuite></testsuites>"""


def test_reads_each_case_and_sums_per_file(tmp_path):
    path = tmp_path / 'run.xml'
    path.write_text(XML)
    run = read(path)
    assert run == {'tests.test_a::test_one': 3.0, 'tests.test_a::test_recipe[mmdet::swin/x_1x_coco.py]': 5.5,
                   'tests.test_b::test_two': 1.0}
    assert dict(per_file(run)) == {'test_a.py': [8.5, 2], 'test_b.py': [1.0, 1]}


def test_two_runs_side_by_side(tmp_path, capsys):
    before, after = tmp_path / 'before.xml', tmp_path / 'after.xml'
    before.write_text(XML)
    after.write_text(XML.replace('time="5.5"', 'time="0.5"').replace(
        '<testcase classname="tests.test_b" name="test_two" time="1.0"><failure/></testcase>', ''))
    main([str(before), str(after), '--markdown'])
    out = capsys.readouterr().out
    assert out.startswith('3 tests, 10 s (0.2 min) in tests / 2 tests, 4 s (0.1 min) in tests\n')
    assert '| test_a.py | 2 | 8.5 | 2 | 3.5 |' in out and '| test_b.py | 1 | 1.0 | 0 | 0.0 |' in out
    assert '| test_a::test_recipe[mmdet::swin/x_1x_coco.py] | 5.5 | 0.5 |' in out
    assert '| test_b::test_two | 1.0 | gone |' in out
    with pytest.raises(SystemExit):
        main([str(before), str(after), str(after)])
