"""The set-up script's logic, without building anything: path resolution, the wheel-cache key, the
Python check and the failure report (``tools/setup/setup_env.sh --plan`` and stub interpreters)."""
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'tools' / 'setup' / 'setup_env.sh'


def _env(**env):
    """The environment of a set-up run: the caller's, without a line, venv or prebuilt wheel chosen outside the test
    (also not through make's own variables: `make test STACK=onedl VENV=.venv` exports both to the tests and passes
    them to every make below it in MAKEFLAGS)."""
    chosen = ('STACK', 'VENV', 'MMCV_WHEEL', 'MMCV_INDEX', 'MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES')
    base = {k: v for k, v in os.environ.items() if k not in chosen}
    return {**base, **env}


def _plan(script=SCRIPT, cwd=None, **env):
    result = subprocess.run(['bash', str(script), '--plan'], cwd=cwd, capture_output=True, text=True,
                            env=_env(**env), check=True)
    return dict(line.split('=', 1) for line in result.stdout.splitlines())


def _copy_repo_files(dst):
    """The files the script reads, in a fake repository root ``dst``."""
    (dst / 'tools' / 'setup').mkdir(parents=True)
    shutil.copy(SCRIPT, dst / 'tools' / 'setup' / 'setup_env.sh')
    for name in ('requirements.txt', 'requirements-test.txt'):
        shutil.copy(ROOT / name, dst / name)
    shutil.copytree(ROOT / 'requirements', dst / 'requirements')
    return dst / 'tools' / 'setup' / 'setup_env.sh'


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
                         capture_output=True, text=True, check=True, env=_env()).stdout
    assert f'STACK=official VENV={ROOT}/rel/venv bash tools/setup/setup_env.sh' in out
    out = subprocess.run(['make', '-n', '-C', str(ROOT), 'test'], cwd=tmp_path, capture_output=True, text=True,
                         check=True, env=_env()).stdout
    assert f'{ROOT}/.venv/bin/python -m pytest' in out
    out = subprocess.run(['make', '-n', '-C', str(ROOT), 'lint'], cwd=tmp_path, capture_output=True, text=True,
                         check=True, env=_env()).stdout
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
    req = other_torch.parents[2] / 'requirements.txt'
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
                            env=_env(PATH=f'{stubs}:{os.environ["PATH"]}', PYTHON=str(stubs / 'python3'),
                                     VENV=str(tmp_path / 'v')))
    assert result.returncode != 0
    assert 'no Python 3.11 found' in result.stderr and 'Supported: Python 3.11' in result.stderr


def test_a_failing_step_reports_step_command_log_tail_and_what_to_try(tmp_path):
    venv = tmp_path / 'venv'
    _stub_python(venv / 'bin' / 'python', '3.11', pip_fails=True)
    result = subprocess.run(['bash', str(SCRIPT)], capture_output=True, text=True,
                            env=_env(VENV=str(venv), INLINE_CACHE=str(tmp_path / 'cache')))
    assert result.returncode == 1
    err = result.stderr
    assert '[setup] FAILED: upgrade pip/setuptools' in err
    assert f'[setup] command: {venv}/bin/python -m pip' in err
    assert 'stub python: simulated failure of: -m pip' in err          # the log's tail
    assert 'what to try' in err and 'setup.log' in err
    assert not (venv / '.inline_setup_done').exists()


def test_unknown_mode_is_refused():
    result = subprocess.run(['bash', str(SCRIPT), '--frobnicate'], capture_output=True, text=True, env=_env())
    assert result.returncode == 2 and 'usage' in result.stderr


def _fake_gpu_tools(bin_dir, compute_cap='9.0', nvcc_release='13.0'):
    """``nvcc`` and ``nvidia-smi`` stubs that describe a machine with one GPU of ``compute_cap``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / 'nvcc').write_text(textwrap.dedent(f"""\
        #!/usr/bin/env bash
        echo "nvcc: NVIDIA (R) Cuda compiler driver"
        echo "Cuda compilation tools, release {nvcc_release}, V{nvcc_release}.48"
        """))
    (bin_dir / 'nvidia-smi').write_text(textwrap.dedent(f"""\
        #!/usr/bin/env bash
        case "$*" in
          -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;;
          *compute_cap*) echo {compute_cap} ;;
          *) exit 1 ;;
        esac
        """))
    for name in ('nvcc', 'nvidia-smi'):
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _stub_torch_python(path, py_version='3.12', torch_version='2.11.0+cu130', capability='9.0'):
    """A Python with torch ``torch_version`` that sees one GPU of ``capability`` (answers the script's -c
    queries by their content) and accepts everything else."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env bash
        if [ "$1" = -c ]; then
          case "$2" in
            *get_device_capability*) echo "arch={capability}" ;;
            *torch.__version__*) echo {torch_version} ;;
            *version_info*) echo {py_version} ;;
          esac
          exit 0
        fi
        echo "stub python: $*"
        """))
    path.chmod(0o755)
    return path


def _gpu_env(tmp_path, **extra):
    env = {**_env(), 'PATH': f'{_fake_gpu_tools(tmp_path / "gpu")}:{os.environ["PATH"]}',
           'INLINE_CACHE': str(tmp_path / 'cache'), 'VENV': str(tmp_path / 'v'), 'MAX_JOBS': '16'}
    env.pop('TORCH_CUDA_ARCH_LIST', None)
    env.pop('CUDA_VISIBLE_DEVICES', None)
    return {**env, **extra}


def _plan_with(args, env):
    result = subprocess.run(['bash', str(SCRIPT), '--plan', *args], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return dict(line.split('=', 1) for line in result.stdout.splitlines())


def test_cuda_plan_takes_the_arch_from_the_gpu_and_keys_the_cache_on_it(tmp_path):
    """nvcc and a GPU found: CUDA ops for the GPU's architecture (nvidia-smi's compute_cap here, the venv
    having no torch yet), MAX_JOBS as set, and a cache folder of its own per CUDA release and arch list."""
    cpu = _plan(INLINE_CACHE=str(tmp_path / 'cache'), VENV=str(tmp_path / 'v'))
    auto = _plan_with([], _gpu_env(tmp_path))
    assert auto['flavour'] == 'cuda13.0' and auto['torch_cuda_arch_list'] == '9.0' and auto['max_jobs'] == '16'
    assert auto['mmcv_build_env'] == 'MMCV_WITH_OPS=1 FORCE_CUDA=1 MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0'
    assert Path(auto['wheel_dir']).name == f'mmcv-2.1.0-torch2.14.1-cuda13.0-sm90-py311-{auto["recipe_key"]}'
    assert auto['recipe_key'] != cpu['recipe_key']
    assert auto['cuda_build_known'].startswith('mmcv 2.1.0: ') and 'cuda_build_known' not in cpu
    onedl = _plan_with([], _gpu_env(tmp_path, STACK='onedl'))
    assert onedl['cuda_build_known'].startswith('onedl-mmcv 2.3.6: builds and imports')
    assert _plan_with(['--cuda'], _gpu_env(tmp_path)) == auto            # the flag gives what detection gives
    # another GPU generation, or an arch list set by hand, is another wheel
    a100 = _plan_with([], {**_gpu_env(tmp_path), 'PATH': f'{_fake_gpu_tools(tmp_path / "a100", "8.0")}:'
                                                          f'{os.environ["PATH"]}'})
    assert a100['torch_cuda_arch_list'] == '8.0' and a100['recipe_key'] != auto['recipe_key']
    both = _plan_with(['--cuda'], _gpu_env(tmp_path, TORCH_CUDA_ARCH_LIST='8.0;9.0'))
    assert both['torch_cuda_arch_list'] == '8.0;9.0' and '-sm80-90-py311-' in both['wheel_dir']
    assert len({auto['recipe_key'], a100['recipe_key'], both['recipe_key']}) == 3


def test_cpu_ops_on_a_gpu_machine_is_the_cpu_recipe_with_the_gpus_hidden(tmp_path):
    cpu = _plan(INLINE_CACHE=str(tmp_path / 'cache'), VENV=str(tmp_path / 'v'))
    forced = _plan_with(['--cpu-ops'], _gpu_env(tmp_path))
    assert forced['flavour'] == 'cpu' and forced['torch_cuda_arch_list'] == '-'
    assert forced['recipe_key'] == cpu['recipe_key'] and forced['wheel_dir'] == cpu['wheel_dir']
    assert forced['mmcv_build_env'] == 'MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS=16 CUDA_VISIBLE_DEVICES='
    # without a GPU nothing is hidden: the plain CPU route
    assert cpu['mmcv_build_env'] == f'MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS={cpu["max_jobs"]}'


def test_cuda_refusals_say_what_is_missing(tmp_path):
    no_nvcc = subprocess.run(['bash', str(SCRIPT), '--plan', '--cuda'], capture_output=True, text=True,
                             env=_env(PATH='/usr/bin:/bin', VENV=str(tmp_path / 'v'),
                                      PYTHON=str(_stub_python(tmp_path / 'py' / 'python3', '3.11'))))
    assert no_nvcc.returncode == 1 and '--cuda needs CUDA\'s compiler nvcc on PATH' in no_nvcc.stderr
    no_arch = subprocess.run(['bash', str(SCRIPT), '--plan', '--cuda'], capture_output=True, text=True,
                             env=_gpu_env(tmp_path, PATH=f'{_fake_gpu_tools(tmp_path / "g", "n/a")}:'
                                                         f'{os.environ["PATH"]}'))
    assert no_arch.returncode == 1 and 'set TORCH_CUDA_ARCH_LIST' in no_arch.stderr
    both = subprocess.run(['bash', str(SCRIPT), '--plan', '--cuda', '--cpu-ops'], capture_output=True, text=True,
                          env=_env())
    assert both.returncode == 2 and 'usage' in both.stderr


def test_mmcv_wheel_mode_builds_for_the_given_pythons_torch(tmp_path):
    """--mmcv-wheel (the GPU machine's route: its own Python 3.12 and torch 2.11): the key and folder follow
    that interpreter and torch, the arch comes from torch's view of the GPU, and a cached wheel is reused
    and printed without building."""
    py = _stub_torch_python(tmp_path / 'sys' / 'python3', capability='9.0')
    env = _gpu_env(tmp_path, PYTHON=str(py), TORCH_CUDA_ARCH_LIST='')
    env.pop('TORCH_CUDA_ARCH_LIST')
    plan = _plan_with(['--mmcv-wheel', '--cuda'], env)
    assert plan['python'] == f'{py} (3.12)' and plan['torch'] == '2.11.0+cu130' and plan['mode'] == 'mmcv-wheel'
    assert plan['torch_cuda_arch_list'] == '9.0' and plan['build_mmcv'] == 'yes'
    assert Path(plan['wheel_dir']).name.startswith('mmcv-2.1.0-torch2.11.0+cu130-cuda13.0-sm90-py312-')
    wheel = Path(plan['wheel_dir']) / 'mmcv-2.1.0-cp312-cp312-linux_x86_64.whl'
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b'')
    out = subprocess.run(['bash', str(SCRIPT), '--mmcv-wheel', '--cuda'], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f'mmcv_wheel={wheel}'
    assert not (tmp_path / 'v').exists()                         # no venv made


def _run(args, **env):
    return subprocess.run(['bash', str(SCRIPT), *args], capture_output=True, text=True, env=_env(**env))


def test_stack_chooses_the_line_its_pins_its_venv_and_its_mmcv_wheel(tmp_path):
    """STACK=onedl: the fork's pins, a venv of its own beside the default line's, its own mmcv build and cache
    folder; unset, the default line (official) in .venv."""
    official = _plan(INLINE_CACHE=str(tmp_path / 'c'))
    onedl = _plan(INLINE_CACHE=str(tmp_path / 'c'), STACK='onedl')
    assert official['stack'] == 'official' and official['venv'] == str(ROOT / '.venv')
    assert official['line_requirements'] == str(ROOT / 'requirements' / 'official.txt')
    assert official['mmcv'] == 'mmcv==2.1.0'
    assert onedl['stack'] == 'onedl' and onedl['venv'] == str(ROOT / '.venv-onedl')
    assert onedl['mmcv'] == 'onedl-mmcv==2.3.6'
    assert Path(onedl['wheel_dir']).name == f'onedl-mmcv-2.3.6-torch2.14.1-cpu-py311-{onedl["recipe_key"]}'
    assert onedl['recipe_key'] != official['recipe_key']
    assert _plan(INLINE_CACHE=str(tmp_path / 'c'), STACK='official') == official
    # VENV still wins over the line's default
    assert _plan(STACK='onedl', VENV=str(tmp_path / 'mine'))['venv'] == str(tmp_path / 'mine')


def test_an_unknown_stack_names_the_lines():
    result = _run(['--plan'], STACK='nightly')
    assert result.returncode == 2
    assert 'STACK=nightly is not an OpenMMLab line' in result.stderr and 'official onedl' in result.stderr


def test_a_venv_of_one_line_is_not_reused_for_the_other(tmp_path):
    """Both lines install the same modules: a venv made for one refuses the other, naming the fix; a venv made
    before lines existed (a stamp, no line file) counts as the official line's."""
    venv = tmp_path / 'v'
    _stub_python(venv / 'bin' / 'python', '3.11')
    (venv / '.inline_setup_done').write_text('old\n')
    result = _run(['--plan'], STACK='onedl', VENV=str(venv))
    assert result.returncode == 1
    assert f'{venv} holds the official OpenMMLab line; STACK=onedl needs a venv of its own' in result.stderr
    assert f'STACK=onedl uses {ROOT}/.venv-onedl' in result.stderr
    (venv / '.inline_stack').write_text('onedl\n')
    assert _run(['--plan'], STACK='onedl', VENV=str(venv)).returncode == 0
    assert 'holds the onedl OpenMMLab line; STACK=official' in _run(['--plan'], VENV=str(venv)).stderr


def test_a_prebuilt_mmcv_wheel_must_be_the_lines(tmp_path):
    """MMCV_WHEEL: a file named as the line's mmcv and version is taken (no build planned); another line's wheel,
    a missing file, or a wheel and an index together stop before anything is installed."""
    ours = tmp_path / 'onedl_mmcv-2.3.6-cp311-cp311-linux_x86_64.whl'
    theirs = tmp_path / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl'
    for wheel in (ours, theirs):
        wheel.write_bytes(b'')
    env = dict(STACK='onedl', VENV=str(tmp_path / 'v'), INLINE_CACHE=str(tmp_path / 'c'))
    plan = _plan(MMCV_WHEEL=str(ours), **env)
    assert plan['mmcv_prebuilt'] == f'wheel:{ours}' and plan['build_mmcv'] == 'no'
    wrong = _run(['--plan'], MMCV_WHEEL=str(theirs), **env)
    assert wrong.returncode == 1
    assert "is not a wheel of the onedl line's onedl-mmcv 2.3.6" in wrong.stderr
    assert 'onedl_mmcv-2.3.6-*.whl' in wrong.stderr
    assert 'no such file' in _run(['--plan'], MMCV_WHEEL=str(tmp_path / 'nope.whl'), **env).stderr
    both = _run(['--plan'], MMCV_WHEEL=str(ours), MMCV_INDEX='https://example.invalid/simple', **env)
    assert both.returncode == 1 and 'not both' in both.stderr
    assert not (tmp_path / 'v').exists()


def test_make_passes_the_line_and_its_venv(tmp_path):
    out = subprocess.run(['make', '-n', '-C', str(ROOT), 'test', 'STACK=onedl'], cwd=tmp_path, capture_output=True,
                         text=True, check=True, env=_env()).stdout
    assert f'STACK=onedl VENV={ROOT}/.venv-onedl bash tools/setup/setup_env.sh' in out
    assert f'{ROOT}/.venv-onedl/bin/python -m pytest' in out
