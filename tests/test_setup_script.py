"""The set-up script's logic, without building anything: path resolution, the wheel-cache key, the
Python check and the failure report (``tools/setup_env.sh --plan`` and stub interpreters)."""
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'tools' / 'setup_env.sh'


def _plan(script=SCRIPT, cwd=None, **env):
    result = subprocess.run(['bash', str(script), '--plan'], cwd=cwd, capture_output=True, text=True,
                            env={**os.environ, **env}, check=True)
    return dict(line.split('=', 1) for line in result.stdout.splitlines())


def _copy_repo_files(dst):
    """The files the script reads, in a fake repository root ``dst``."""
    (dst / 'tools').mkdir(parents=True)
    shutil.copy(SCRIPT, dst / 'tools' / 'setup_env.sh')
    for name in ('requirements.txt', 'requirements-test.txt'):
        shutil.copy(ROOT / name, dst / name)
    return dst / 'tools' / 'setup_env.sh'


def _stub_python(path, version, pip_fails=False):
    """An executable that reports ``version`` and fails every other call (a broken pip)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env bash
        if [ "$1" = -c ]; then echo {version}; exit 0; fi
        echo "stub python: simulated failure of: $*"
        exit {1 if pip_fails else 0}
        """))
    path.chmod(0o755)
    return path


def test_relative_venv_resolves_against_the_callers_directory(tmp_path):
    elsewhere = tmp_path / 'somewhere'
    elsewhere.mkdir()
    plan = _plan(cwd=elsewhere, VENV='envs/v', INLINE_CACHE='cache')
    assert plan['root'] == str(ROOT)
    assert plan['venv'] == str(elsewhere / 'envs' / 'v')
    assert plan['cache'] == str(elsewhere / 'cache')
    assert plan['wheel_dir'].startswith(str(elsewhere / 'cache') + '/mmcv-2.1.0-torch')
    assert plan['wheel_dir'].endswith(plan['recipe_key'])
    assert plan['build_mmcv'] == 'yes' and plan['venv_up_to_date'] == 'no'


def test_make_passes_an_absolute_venv_also_with_make_C(tmp_path):
    out = subprocess.run(['make', '-n', '-C', str(ROOT), 'setup', 'VENV=rel/venv'], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    assert f'VENV={ROOT}/rel/venv bash tools/setup_env.sh' in out
    out = subprocess.run(['make', '-n', '-C', str(ROOT), 'test'], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    assert f'{ROOT}/.venv/bin/python -m pytest' in out
    out = subprocess.run(['make', '-n', '-C', str(ROOT), 'lint'], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    assert f'{ROOT}/.venv/bin/ruff check .' in out


def test_recipe_key_follows_the_build_recipe_only(tmp_path):
    base = _plan(_copy_repo_files(tmp_path / 'a'), INLINE_CACHE=str(tmp_path / 'c'))

    edited_build = _copy_repo_files(tmp_path / 'b')
    text = edited_build.read_text()
    assert 'pip wheel --no-build-isolation --no-deps' in text
    edited_build.write_text(text.replace('pip wheel --no-build-isolation --no-deps',
                                         'pip wheel --no-build-isolation --no-deps --verbose'))
    assert _plan(edited_build, INLINE_CACHE=str(tmp_path / 'c'))['recipe_key'] != base['recipe_key']

    other_torch = _copy_repo_files(tmp_path / 'd')
    req = other_torch.parent.parent / 'requirements.txt'
    req.write_text(req.read_text().replace('torch==2.14.1', 'torch==2.13.0'))
    assert _plan(other_torch, INLINE_CACHE=str(tmp_path / 'c'))['recipe_key'] != base['recipe_key']

    edited_comment = _copy_repo_files(tmp_path / 'e')
    edited_comment.write_text(edited_comment.read_text().replace('# Create (or update)', '# Create or update'))
    assert _plan(edited_comment, INLINE_CACHE=str(tmp_path / 'c'))['recipe_key'] == base['recipe_key']


def test_a_cached_wheel_of_the_same_recipe_skips_the_build(tmp_path):
    plan = _plan(INLINE_CACHE=str(tmp_path / 'cache'), VENV=str(tmp_path / 'v'))
    wheel_dir = Path(plan['wheel_dir'])
    wheel_dir.mkdir(parents=True)
    (wheel_dir / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl').write_bytes(b'')
    assert _plan(INLINE_CACHE=str(tmp_path / 'cache'), VENV=str(tmp_path / 'v'))['build_mmcv'] == 'no'


def test_an_unsupported_python_stops_with_the_supported_versions(tmp_path):
    stubs = tmp_path / 'bin'
    for name in ('python3', 'python3.11'):
        _stub_python(stubs / name, '3.10')
    result = subprocess.run(['bash', str(SCRIPT), '--plan'], capture_output=True, text=True,
                            env={**os.environ, 'PATH': f'{stubs}:{os.environ["PATH"]}',
                                 'PYTHON': str(stubs / 'python3'), 'VENV': str(tmp_path / 'v')})
    assert result.returncode != 0
    assert 'no Python 3.11 found' in result.stderr and 'Supported: Python 3.11' in result.stderr


def test_a_failing_step_reports_step_command_log_tail_and_what_to_try(tmp_path):
    venv = tmp_path / 'venv'
    _stub_python(venv / 'bin' / 'python', '3.11', pip_fails=True)
    result = subprocess.run(['bash', str(SCRIPT)], capture_output=True, text=True,
                            env={**os.environ, 'VENV': str(venv), 'INLINE_CACHE': str(tmp_path / 'cache')})
    assert result.returncode == 1
    err = result.stderr
    assert '[setup] FAILED: upgrade pip/setuptools' in err
    assert f'[setup] command: {venv}/bin/python -m pip' in err
    assert 'stub python: simulated failure of: -m pip' in err          # the log's tail
    assert 'what to try' in err and 'setup.log' in err
    assert not (venv / '.inline_setup_done').exists()


def test_unknown_mode_is_refused():
    result = subprocess.run(['bash', str(SCRIPT), '--frobnicate'], capture_output=True, text=True)
    assert result.returncode == 2 and 'usage' in result.stderr
