"""tools/analysis_tools/benchmark.py (:mod:`inline_backbones.benchmark`) on a CPU at tiny sizes, in this process: the
model-name grammar, the one timing function of every row, the rows of each option, the files, and saved results of
this tool and of the two it replaced read back (docs/benchmarks/*/results.json). The GPU figures of
docs/benchmarks.md come from the same code on a GPU (tools/device/gpu_backbone_check.sh).

Timings are not asserted (they are noise on a shared machine); what is checked is that every derived column is the
stated function of the measured ones, and that FLOPs and params are the models' own.
"""
import csv
import json
import math
import os.path as osp
import re

import pytest
import torch

from inline_backbones import InLineCSwinTransformer, InLinePVT, InLineSwinTransformer
from inline_backbones.benchmark import cli, memory, names, plots, report, runs, timing
from inline_backbones.benchmark.options import parse_args

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SAVED = osp.join(ROOT, 'docs', 'benchmarks')
MODELS = ('inline-swin-t', 'mmdet:swin-t', 'swin-t-global')
SIZES = ('64x64', '96x128')
QUICK = ['--warmup', '0', '--no-memory']


def flop_analyzer(model, inputs):
    """mmengine's FlopAnalyzer with the package's attention handles, imported here: only the tests that count FLOPs
    need an OpenMMLab line."""
    from inline_backbones.analysis.flops import flop_analyzer as analyzer

    return analyzer(model, inputs)


@pytest.fixture(autouse=True, scope='module')
def one_thread():
    """The models here are tiny: one thread runs them about as fast as two, and is not held up when other processes
    share the cores (torch's threads wait for each other at every op)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _csv_rows(out_dir):
    with open(out_dir / 'results.csv') as f:
        return list(csv.DictReader(f))


def macs_besides_attention(H, W):
    """MACs of swin-t-global besides its attention products, by hand: patch embedding, qkv/proj and MLPs
    (12 C^2 per token), patch merging (8 C^2 per merged token) and LayerNorms (mmengine counts 5 per
    element: patch embedding, two per block, each stage's output norm, each merging)."""
    C, N = 96, H * W // 16
    total = 3 * 96 * 16 * N + 5 * N * C
    for i, depth in enumerate((2, 2, 6, 2)):
        total += depth * N * 12 * C * C + 5 * (2 * depth + 1) * N * C
        if i < 3:
            N //= 4
            total += N * 4 * C * 2 * C + 5 * N * 4 * C
            C *= 2
    return total


# --- model names ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('name, check', [
    ('inline-swin-s', lambda m: type(m) is InLineSwinTransformer and m.stage_dims[0] == 96
     and len(m.layers[2].blocks) == 18 and not m.padding_aware),
    ('inline-swin-t-pa-w56@torch', lambda m: type(m) is InLineSwinTransformer and m.padding_aware
     and m.inline_window_size == 56),
    ('inline-pvt-m-pa', lambda m: type(m) is InLinePVT and m.padding_aware and len(m.layers[2].blocks) == 18),
    ('swin-t-global', lambda m: type(m) is InLineSwinTransformer
     and all(type(b.attn) is names.GlobalSoftmaxAttention for s in m.layers for b in s.blocks)),
    ('flatten-swin-t', lambda m: type(m) is InLineSwinTransformer and m.attn_type == 'FFSS' and not m.padding_aware
     and [b.attn.window_size for b in m.layers[1].blocks] == [28, 28]
     and not m.layers[0].blocks[1].attn.global_attention and m.layers[0].blocks[1].attn.shift),
    ('flatten-swin-b-pa-global', lambda m: type(m) is InLineSwinTransformer and m.padding_aware
     and m.stage_dims[0] == 128 and all(b.attn.global_attention for s in m.layers[:2] for b in s.blocks)),
    ('inline-cswin-b-pa', lambda m: type(m) is InLineCSwinTransformer and m.padding_aware and m.stage_dims[0] == 96
     and m.attn_type == 'IISS'),
    ('cswin-t-stripes', lambda m: type(m) is InLineCSwinTransformer and m.attn_type == 'SSSS'
     and [len(s.blocks) for s in m.layers] == [1, 2, 21, 1] and m.stage_dims == [64, 128, 256, 512]),
    ('mmdet:swin-b', lambda m: type(m).__module__ == 'mmdet.models.backbones.swin' and m.num_features[0] == 128),
    ('mmdet:pvt-t', lambda m: type(m).__module__ == 'mmdet.models.backbones.pvt'
     and type(m).__name__ == 'PyramidVisionTransformer'),
    ('timm:swin-t', lambda m: m.pretrained_cfg['architecture'] == 'swin_tiny_patch4_window7_224'
     and m.patch_embed.img_size == (64, 96) and type(m).__name__ == 'FeatureListNet'),
    ('timm:swin-t-w14', lambda m: type(m).__module__ == 'timm.models.swin_transformer'
     and m.layers[0].blocks[0].window_size == (14, 14)),
    ('timm:pvt-v2-b1', lambda m: m.pretrained_cfg['architecture'] == 'pvt_v2_b1'
     and type(m).__name__ == 'FeatureListNet'),
])
def test_each_name_builds_its_librarys_model(name, check):
    parsed = names.parse(name)
    assert str(parsed) == name                                   # the name reads back as written
    assert parsed.ours == (':' not in name)
    assert check(names.build_backbone(parsed, (64, 96)))


def test_padding_aware_twins_keep_the_path_and_the_window():
    assert str(names.padding_aware_twin(names.parse('flatten-swin-t-global'))) == 'flatten-swin-t-pa-global'
    twin = names.padding_aware_twin(names.parse('inline-swin-t-w56@torch'))
    assert str(twin) == 'inline-swin-t-pa-w56@torch'
    assert names.padding_aware_twin(twin) is None and names.padding_aware_twin(names.parse('mmdet:swin-t')) is None
    args = parse_args(['--padding-aware', '--models', 'inline-pvt-t@torch', 'timm:pvt-v2-b1'])
    assert [str(n) for n in args.models] == ['inline-pvt-t@torch', 'inline-pvt-t-pa@torch', 'timm:pvt-v2-b1']


@pytest.mark.parametrize('bare, choices', [('swin-t', ['mmdet:swin-t', 'mmseg:swin-t', 'timm:swin-t']),
                                           ('pvt-s', ['mmdet:pvt-s']), ('swin-t-w14', ['timm:swin-t-w14']),
                                           ('pvt-v2-b1', ['timm:pvt-v2-b1'])])
def test_a_bare_name_of_another_librarys_model_is_refused_with_the_choices(bare, choices, capsys):
    with pytest.raises(ValueError, match='another library') as err:
        names.parse(bare)
    assert str(err.value).endswith('say whose, ' + ' or '.join(choices))
    with pytest.raises(SystemExit):
        parse_args(['--models', 'inline-swin-t', bare])
    assert f"model '{bare}' is another library's" in capsys.readouterr().err


@pytest.mark.parametrize('unknown', ['swin-x', 'mmdet:swin-t-w14', 'timm:pvt-t', 'inline-swin-t-w', 'inline-pvt-b',
                                     'flatten-swin-t-global-pa', 'flatten-pvt-t', 'flatten-swin-t-w7',
                                     'inline-swin-t-w0', 'timm:swin-t-w0'])
def test_an_unknown_name_is_refused_with_the_grammar(unknown, capsys):
    with pytest.raises(ValueError) as err:
        names.parse(unknown)
    assert str(err.value) == f'unknown model {unknown!r}\n{names.GRAMMAR}'
    with pytest.raises(SystemExit):
        parse_args(['--models', unknown])
    err = capsys.readouterr().err
    assert f'unknown model {unknown!r}' in err and 'mmdet:swin-{t,s,b}' in err and 'timm:pvt-v2-b1' in err


def test_names_outside_their_place_are_refused(capsys):
    with pytest.raises(ValueError, match=r"unknown InLine attention path @cuda; choose one of \('reference'"):
        names.parse('inline-swin-t@cuda')
    for argv, message in [(['--models', 'mmseg:swin-t'], "mmseg's Swin is timed inside UperNet"),
                          (['--task', 'upernet', '--models', 'mmdet:swin-t'], "no upernet config for 'mmdet:swin-t'"),
                          (['--task', 'mask-rcnn', '--models', 'inline-swin-t-pa'], 'no mask-rcnn config'),
                          (['--models', 'inline-swin-t', '--reference', 'mmdet:swin-t'], 'not among --models')]:
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert message in capsys.readouterr().err


def _error(argv, capsys):
    """The last line of argparse's error for the command line ``argv`` (which it refuses, exit status 2)."""
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.splitlines()[-1].split(' error: ', 1)[1]


@pytest.mark.parametrize('flag, values, message', [
    ('--rounds', ['0'], "expected an integer >= 1, got '0'"),
    ('--rounds', ['2.5'], "expected an integer >= 1, got '2.5'"),
    ('--warmup', ['-1'], "expected an integer >= 0, got '-1'"),
    ('--batches', ['2', '0'], "expected an integer >= 1, got '0'"),
    ('--profile', ['-3'], "expected an integer >= 0, got '-3'"),
    ('--window-sizes', ['7', '0'], "expected an integer >= 1, got '0'"),
    ('--gemm-size', ['0'], "expected an integer >= 1, got '0'"),
    ('--max-seconds', ['0'], "expected a number > 0, got '0'"),
    ('--max-seconds', ['nan'], "expected a number > 0, got 'nan'"),
    ('--sizes', ['64', '0x64'], "size '0x64': give HxW (800x1333) or one side (1120), sides integers >= 1"),
])
def test_numeric_flags_are_refused_out_of_range_when_parsed(flag, values, message, capsys):
    assert _error([flag, *values], capsys) == f'argument {flag}: {message}'


def test_numeric_flags_take_their_bounds():
    args = parse_args(['--rounds', '1', '--warmup', '0', '--profile', '0', '--batches', '1', '--gemm-size', '1',
                       '--max-seconds', 'inf', '--sizes', '1'])
    assert (args.rounds, args.warmup, args.profile, args.batches, args.gemm_size, args.max_seconds, args.sizes) == (
        1, 0, 0, [1], 1, math.inf, [(1, 1)])


@pytest.mark.parametrize('argv, message', [
    (['--models', 'swin-t'], "argument --models: model 'swin-t' is another library's: say whose, mmdet:swin-t or "
     'timm:swin-t'),
    (['--task', 'upernet', '--models', 'swin-t'], "argument --models: model 'swin-t' is another library's: say "
     'whose, mmseg:swin-t'),
    (['--task', 'mask-rcnn', '--models', 'swin-b'], "argument --models: model 'swin-b' is another library's, and "
     'none of mmdet:swin-b, mmseg:swin-b runs with --task mask-rcnn: mmdet:swin-b without --task; mmseg:swin-b with '
     '--task upernet'),
    (['--models', 'inline-swin-t', 'timm:swin-t', '--reference', 'swin-t'], "argument --reference: model 'swin-t' "
     "is another library's: say whose, timm:swin-t"),
    (['--models', 'inline-swin-t', '--reference', 'swin-t'], "argument --reference: model 'swin-t' is another "
     "library's, and none of mmdet:swin-t, timm:swin-t is among --models: add the one you mean to --models"),
    (['--from-json', 'results.json', '--reference', 'swin-t'], "argument --reference: model 'swin-t' is another "
     "library's: say whose, mmdet:swin-t or mmseg:swin-t or timm:swin-t"),
])
def test_a_bare_name_is_refused_with_the_choices_that_command_line_takes(argv, message, capsys):
    assert _error(argv, capsys) == message


def test_every_suggestion_for_a_bare_name_is_taken(capsys):
    """For every bare name and task: each name suggested in place of the bare one, put in its place, is taken by the
    same command line; where none is, each under the --task the message says."""
    for bare in ('swin-t', 'swin-s', 'swin-b', 'pvt-t', 'swin-t-w14', 'pvt-v2-b1'):
        for task in ('backbone', 'mask-rcnn', 'upernet'):
            message = _error(['--task', task, '--models', bare], capsys)
            if 'say whose, ' in message:
                for name in message.split('say whose, ')[1].split(' or '):
                    assert [str(n) for n in parse_args(['--task', task, '--models', name]).models] == [name]
                continue
            for way in message.split(f'runs with --task {task}: ')[1].split('; '):
                name, _, flags = way.partition(' ')
                for flag in flags.split(' or '):
                    other = 'backbone' if flag == 'without --task' else flag.removeprefix('with --task ')
                    assert other != task and parse_args(['--task', other, '--models', name]).models


@pytest.mark.slow
def test_whole_models_come_from_the_configs():
    model = names.build_task_model('mask-rcnn', names.parse('mmdet:swin-t'))       # mmdet's own config (mmdet::)
    assert type(model.model).__name__ == 'MaskRCNN' and type(model.model.backbone).__module__.startswith('mmdet.')
    out = model(torch.randn(1, 3, 64, 96))
    assert isinstance(out, tuple) and out


# --- timing --------------------------------------------------------------------------------------------------------

class StandInClock:
    """Counts time_call's calls (without making them) and returns 1, 2, 3, ... ms."""

    def __init__(self):
        self.devices = []

    def __call__(self, fn, device):
        self.devices.append(device.type)
        return float(len(self.devices))


def test_cpu_and_gpu_rows_share_one_timing_function(monkeypatch, tmp_path):
    """The rows of the CPU options (GEMM yardstick, FLOPs) and of the GPU options (batches, padding-aware,
    training) are timed by timing.time_call, in interleaved rounds: one call per model (and GEMM) per round."""
    clock = StandInClock()
    monkeypatch.setattr(timing, 'time_call', clock)
    cpu_rows = cli.main(['--device', 'cpu', '--sizes', '64', '--models', 'inline-swin-t', 'inline-pvt-t', '--rounds',
                         '2', '--warmup', '1', '--gemm-size', '64', '--no-memory', '--out-dir', str(tmp_path / 'a')])
    assert len(clock.devices) == 3 * (2 + 1)               # 3 rounds of (two models, one GEMM)
    assert [r['latency_ms'] for r in cpu_rows] == [5.5, 6.5]     # medians of rounds 2-3: calls 4, 7 and 5, 8
    assert cpu_rows[0]['gemm_gflops_per_s'] == 2 * 64 ** 3 / 7.5e-3 / 1e9
    clock.devices.clear()
    gpu_rows = cli.main(['--device', 'cpu', '--sizes', '64', '--batches', '2', '--padding-aware', '--train',
                         '--models', 'inline-pvt-t', '--rounds', '1', '--warmup', '0', '--no-memory',
                         '--out-dir', str(tmp_path / 'b')])
    assert len(clock.devices) == 2 and [r['latency_ms'] for r in gpu_rows] == [1.0, 2.0]


def test_one_call_is_timed_by_cuda_events_on_a_gpu_and_the_wall_clock_on_a_cpu(monkeypatch):
    seen, event_names = [], iter(['start', 'end'])

    class Event:
        def __init__(self, enable_timing):
            assert enable_timing
            self.name = next(event_names)

        def record(self):
            seen.append(f'record {self.name}')

        def elapsed_time(self, end):
            seen.append('elapsed')
            return 12.5

    monkeypatch.setattr(torch.cuda, 'Event', Event)
    monkeypatch.setattr(torch.cuda, 'synchronize', lambda device: seen.append(f'synchronize {device}'))
    assert timing.time_call(lambda: seen.append('call'), torch.device('cuda', 0)) == 12.5
    assert seen == ['record start', 'call', 'record end', 'synchronize cuda:0', 'elapsed']
    ticks = iter([10.0, 10.25])
    monkeypatch.setattr(timing.time, 'perf_counter', lambda: next(ticks))
    assert timing.time_call(lambda: None, torch.device('cpu')) == 250.0


def test_interleaved_rounds_leave_out_the_warmup_and_a_failing_call(monkeypatch):
    order = []

    def call(key):
        def fn():
            order.append(key)
            if key == 'bad' and len(order) > 2:
                raise RuntimeError('out of memory\nmore')
        return fn

    monkeypatch.setattr(timing, 'time_call', lambda fn, device: fn() or float(len(order)))
    times, failed = timing.interleaved({k: call(k) for k in ('a', 'bad', 'b')}, 2, 1, torch.device('cpu'))
    assert order == ['a', 'bad', 'b', 'a', 'bad', 'b', 'a', 'b']
    assert times == {'a': [4.0, 7.0], 'bad': [], 'b': [6.0, 8.0]} and failed == {'bad': 'out of memory'}


# --- rows of each option -------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_benchmark_end_to_end(tmp_path, capsys):
    cli.main(['--sizes', *SIZES, '--models', *MODELS, '--rounds', '2', *QUICK, '--gemm-size', '256',
              '--out-dir', str(tmp_path)])
    out = capsys.readouterr().out
    assert 'inline-swin-t (batch 1, fp32): latency ~ pixels^' in out
    csv_rows = _csv_rows(tmp_path)
    assert [(r['model'], r['size']) for r in csv_rows] == [(m, s) for s in SIZES for m in MODELS]
    data = json.loads((tmp_path / 'results.json').read_text())
    assert data['meta']['threads'] == torch.get_num_threads() and data['meta']['options']['dtype'] == ['fp32']
    rows = data['results']
    assert len(rows) == 6
    for row, csv_row in zip(rows, csv_rows, strict=True):
        assert float(csv_row['latency_ms']) == row['latency_ms'] and float(csv_row['gflops']) == row['gflops']
    isclose = math.isclose
    latency = {(r['model'], r['size']): r['latency_ms'] for r in rows}
    for r in rows:
        assert 0 < r['min_ms'] <= r['latency_ms'] <= r['max_ms']
        assert isclose(r['images_per_s'], r['batch'] * 1e3 / r['latency_ms'], rel_tol=1e-9)
        assert isclose(r['achieved_gflops_per_s'], 2 * r['gflops'] * r['batch'] / (r['latency_ms'] / 1e3), rel_tol=1e-9)
        assert isclose(r['gemm_fraction'], r['achieved_gflops_per_s'] / r['gemm_gflops_per_s'], rel_tol=1e-9)
        assert isclose(r['ratio_to_reference'], r['latency_ms'] / latency[('mmdet:swin-t', r['size'])], rel_tol=1e-9)
        assert r['reference'] == 'mmdet:swin-t'
        assert r['peak_memory_mb'] is None and r['launches'] is None   # --no-memory; CUDA only
    # FLOPs and params are the models' own: ours counted here the same way, and the others in order.
    ours = InLineSwinTransformer('tiny', drop_path_rate=0.).eval()
    for size in SIZES:
        H, W = (int(v) for v in size.split('x'))
        with torch.no_grad():
            macs = flop_analyzer(ours, (torch.randn(1, 3, H, W),)).total()
        row = {r['model']: r for r in rows if r['size'] == size}
        assert row['inline-swin-t']['gflops'] == macs / 1e9
        # global softmax over all N tokens of each stage: QK^T and AV cost N^2 C each, per block
        sdpa = sum(depth * 2 * (H * W // 4 ** (i + 2)) ** 2 * 96 * 2 ** i for i, depth in enumerate((2, 2, 6, 2)))
        assert row['swin-t-global']['gflops'] * 1e9 - sdpa == macs_besides_attention(H, W)
    assert rows[0]['params_m'] == sum(p.numel() for p in ours.parameters()) / 1e6
    swin = {r['size']: r['gflops'] for r in rows if r['model'] == 'mmdet:swin-t'}
    assert swin['96x128'] > swin['64x64']
    assert (tmp_path / 'latency_memory.png').stat().st_size > 10_000
    assert (tmp_path / 'results.md').read_text() == out.rsplit('wrote ', 1)[0]


@pytest.mark.slow
def test_cpu_memory_probe_sees_the_forward_grow_with_the_image():
    """The CPU memory figure (peak RSS growth during one forward, in a fresh process): at 512x512 the forward
    holds stage 1's output (96 x 128 x 128 fp32, 6 MiB; 0.4 MiB at 128x128), so it grows by at least the
    difference (5.6 MiB) from 128x128 (measured here: 31 and 86 MiB)."""
    def probe(size):
        return memory.cpu_peak_mb(['--models', 'inline-swin-t', '--sizes', size, '--dtype', 'fp32', '--batches', '1'])

    small, large = probe('128x128'), probe('512x512')
    assert small > 0 and large - small >= 96 * (128 ** 2 - 32 ** 2) * 4 / 2 ** 20, (small, large)


@pytest.mark.slow
def test_dtype_modes_are_timed_together_with_same_dtype_gemms(tmp_path):
    # bf16 GEMMs are emulated (slow) on CPUs without avx512_bf16: a small yardstick keeps the test short.
    cli.main(['--sizes', '64x64', '--models', 'inline-swin-t', 'mmdet:swin-t', '--dtype', 'fp32', 'bf16', 'bf16-pure',
              '--rounds', '1', *QUICK, '--gemm-size', '512', '--out-dir', str(tmp_path)])
    rows = {(r['model'], r['dtype']): r for r in _csv_rows(tmp_path)}
    assert set(rows) == {(m, d) for m in ('inline-swin-t', 'mmdet:swin-t') for d in ('fp32', 'bf16', 'bf16-pure')}
    inline = {d: rows['inline-swin-t', d] for d in ('fp32', 'bf16', 'bf16-pure')}
    assert float(inline['fp32']['speedup_over_fp32']) == 1.0
    for r in inline.values():
        assert float(r['latency_ms']) > 0 and float(r['speedup_over_fp32']) > 0
    # Each mode's %GEMM is against a GEMM of its own dtype, timed in the same rounds.
    assert inline['bf16']['gemm_gflops_per_s'] == inline['bf16-pure']['gemm_gflops_per_s']
    assert inline['bf16']['gemm_gflops_per_s'] != inline['fp32']['gemm_gflops_per_s']
    assert math.isclose(float(inline['bf16']['gemm_fraction']), float(inline['bf16']['achieved_gflops_per_s'])
                        / float(inline['bf16']['gemm_gflops_per_s']), rel_tol=1e-6)
    # mmdet's Swin keeps fp32 attention masks, so pure bf16 fails there: reported, not fatal.
    swin_pure = rows['mmdet:swin-t', 'bf16-pure']
    assert swin_pure['note'].startswith('skipped') or float(swin_pure['latency_ms']) > 0
    assert math.isclose(float(inline['bf16']['ratio_to_reference']),
                        float(inline['bf16']['latency_ms']) / float(rows['mmdet:swin-t', 'bf16']['latency_ms']))


def test_fp16_is_refused_on_a_cpu_without_native_fp16():
    with open('/proc/cpuinfo') as f:
        flags = next(line for line in f if line.startswith('flags')).split()
    if 'avx512_fp16' in flags or 'amx_fp16' in flags:
        pytest.skip('this CPU has native fp16')
    with pytest.raises(SystemExit, match='avx512_fp16'):
        cli.main(['--sizes', '64x64', '--models', 'inline-swin-t', '--dtype', 'fp16-pure', '--device', 'cpu'])


@pytest.mark.slow
def test_window_sweep_writes_its_table_and_plot(tmp_path, capsys):
    args = parse_args(['--window-sizes', '7', '14'])            # the paper's Fig. 3 is at 224x224
    assert args.sizes == [(224, 224)] and [str(n) for n in args.models] == [
        'timm:swin-t-w7', 'inline-swin-t-w7', 'timm:swin-t-w14', 'inline-swin-t-w14']
    cli.main(['--window-sizes', '7', '14', '--sizes', '64x64', '--rounds', '1', *QUICK, '--no-flops',
              '--out-dir', str(tmp_path)])
    assert [(r['model'], r['size']) for r in _csv_rows(tmp_path)] == [(str(n), '64x64') for n in args.models]
    assert 'speed-up' in capsys.readouterr().out and (tmp_path / 'window_sizes.png').stat().st_size > 10_000


@pytest.mark.slow
def test_benchmark_takes_the_pvt_models(tmp_path):
    """InLine-PVT-T against mmdet's PVT v1-T, ratios to mmdet:pvt-t (the PVT family's reference)."""
    cli.main(['--sizes', '64x64', '--models', 'inline-pvt-t', 'mmdet:pvt-t', '--rounds', '1', *QUICK,
              '--out-dir', str(tmp_path)])
    rows = {r['model']: r for r in json.loads((tmp_path / 'results.json').read_text())['results']}
    assert set(rows) == {'inline-pvt-t', 'mmdet:pvt-t'} and rows['mmdet:pvt-t']['ratio_to_reference'] == 1
    ours = InLinePVT('tiny', drop_path_rate=0.)
    assert rows['inline-pvt-t']['params_m'] == sum(p.numel() for p in ours.parameters()) / 1e6
    v1 = sum(p.numel() for p in InLinePVT('pvt-v1-tiny').parameters())     # the same arch as ours, SSSS
    assert rows['mmdet:pvt-t']['params_m'] == v1 / 1e6 and 12.5e6 < v1 < 13e6    # PVT v1-T (13.2M) without its head
    with torch.no_grad():
        assert rows['inline-pvt-t']['gflops'] == flop_analyzer(ours.eval(), (torch.randn(1, 3, 64, 64),)).total() / 1e9


def test_cswin_rows_against_cswin(tmp_path):
    """InLine-CSwin-T against CSWin-T on the same trunk (the CSwin family's reference: the first model named)."""
    rows = cli.main(['--device', 'cpu', '--sizes', '64', '--rounds', '1', *QUICK, '--no-flops',
                     '--models', 'cswin-t-stripes', 'inline-cswin-t', '--out-dir', str(tmp_path)])
    assert [r['model'] for r in rows] == ['cswin-t-stripes', 'inline-cswin-t']
    assert all(r['reference'] == 'cswin-t-stripes' for r in rows)
    assert rows[1]['params_m'] == sum(p.numel() for p in InLineCSwinTransformer('tiny').parameters()) / 1e6


def _timed_rows(latencies):
    """Rows of one setting (64x64, batch 1, fp32), as the benchmark makes them: model -> its latency in ms."""
    return [dict(dict.fromkeys(report.COLUMNS), model=model, size='64x64', pixels=64 * 64, batch=1, dtype='fp32',
                 device='cpu', step='infer', capture='', run=0, note='', latency_ms=ms, min_ms=ms, max_ms=ms,
                 images_per_s=1e3 / ms) for model, ms in latencies.items()]


REFERENCE_RUN = {'inline-swin-t': 3.0, 'mmdet:swin-t': 2.0, 'cswin-t-stripes': 8.0, 'inline-cswin-t': 4.0,
                 'inline-pvt-t': 5.0}


@pytest.mark.parametrize('references, expected', [
    ([], {'inline-swin-t': 'mmdet:swin-t', 'mmdet:swin-t': 'mmdet:swin-t', 'cswin-t-stripes': 'cswin-t-stripes',
          'inline-cswin-t': 'cswin-t-stripes', 'inline-pvt-t': 'inline-pvt-t'}),
    (['mmdet:swin-t'], dict.fromkeys(REFERENCE_RUN, 'mmdet:swin-t')),
    (['inline-pvt-t', 'inline-cswin-t'], {'inline-swin-t': 'inline-pvt-t', 'mmdet:swin-t': 'inline-pvt-t',
                                         'cswin-t-stripes': 'inline-cswin-t', 'inline-cswin-t': 'inline-cswin-t',
                                         'inline-pvt-t': 'inline-pvt-t'}),
])
def test_reference_sets_the_ratio_of_every_row(references, expected, monkeypatch, tmp_path, capsys):
    """Without --reference each family's rows are against their own family's model (Swin: mmdet's, the first of
    another library; CSwin and PVT: their first model), the table's ref column naming it; --reference NAME puts the
    rows of NAME's family against NAME and every other row against the first NAME, the CSwin rows included, and the
    column is titled x NAME where one NAME is every row's reference. The same for saved results (--from-json)."""
    monkeypatch.setattr(runs, 'benchmark', lambda args, device: _timed_rows(REFERENCE_RUN))
    flag = ['--reference', *references] if references else []
    rows = cli.main(['--device', 'cpu', '--models', *REFERENCE_RUN, *flag, '--out-dir', str(tmp_path)])
    assert {r['model']: r['reference'] for r in rows} == expected
    assert {r['model']: r['ratio_to_reference'] for r in rows} == {
        model: ms / REFERENCE_RUN[expected[model]] for model, ms in REFERENCE_RUN.items()}
    header = capsys.readouterr().out.split('\n\n')[1].splitlines()[0]
    if len(set(expected.values())) == 1:
        assert header.endswith(' | x mmdet:swin-t |')
    else:
        assert header.endswith(' | x ref | ref |')
    saved = cli.main(['--from-json', str(tmp_path / 'results.json'), '--reference', 'mmdet:swin-t'])
    assert {r['model']: r['reference'] for r in saved} == dict.fromkeys(REFERENCE_RUN, 'mmdet:swin-t')


def test_reference_takes_one_model_per_family(capsys):
    assert {re.search(r'\(\?P<family>(\w+)\)', pattern)[1] for _, pattern in names.PATTERNS} == set(names.FAMILIES)
    message = _error(['--models', 'inline-swin-t', 'mmdet:swin-t', '--reference', 'inline-swin-t', 'mmdet:swin-t'],
                     capsys)
    assert message.startswith('--reference inline-swin-t mmdet:swin-t: one per family (swin: inline-swin-*, ')


@pytest.mark.slow
def test_flatten_rows_against_swin(tmp_path):
    """FLatten-Swin-T, windowed and global, in the Swin family: ratios to mmdet's Swin-T in the same rounds, FLOPs
    and params of the preset's own model."""
    rows = cli.main(['--device', 'cpu', '--sizes', '64', '--rounds', '1', *QUICK, '--models', 'flatten-swin-t',
                     'flatten-swin-t-global', 'inline-swin-t', 'mmdet:swin-t', '--out-dir', str(tmp_path)])
    by_model = {r['model']: r for r in rows}
    assert list(by_model) == ['flatten-swin-t', 'flatten-swin-t-global', 'inline-swin-t', 'mmdet:swin-t']
    assert all(r['reference'] == 'mmdet:swin-t' for r in rows) and by_model['mmdet:swin-t']['ratio_to_reference'] == 1
    flatten = InLineSwinTransformer('flatten-tiny', drop_path_rate=0.).eval()
    assert by_model['flatten-swin-t']['params_m'] == sum(p.numel() for p in flatten.parameters()) / 1e6
    assert by_model['flatten-swin-t-global']['params_m'] == by_model['flatten-swin-t']['params_m']
    with torch.no_grad():
        macs = flop_analyzer(flatten, (torch.randn(1, 3, 64, 64),)).total()
    assert by_model['flatten-swin-t']['gflops'] == macs / 1e9


def test_interleaved_rows_and_ratios(tmp_path):
    rows = cli.main(['--device', 'cpu', '--sizes', '64', '--batches', '2', '--rounds', '2', *QUICK, '--no-flops',
                     '--models', 'inline-swin-t', 'inline-swin-t@reference', '--out-dir', str(tmp_path)])
    assert [r['model'] for r in rows] == ['inline-swin-t', 'inline-swin-t@reference']
    assert all(r['reference'] == 'inline-swin-t' for r in rows)   # no other library's Swin: the first one
    for r in rows:
        assert r['min_ms'] <= r['latency_ms'] <= r['max_ms']
        assert r['ratio_to_reference'] == pytest.approx(r['latency_ms'] / rows[0]['latency_ms'])
        assert r['launches'] is None and r['peak_memory_mb'] is None   # CUDA only; --no-memory
    saved = json.loads((tmp_path / 'results.json').read_text())
    assert saved['results'] == rows and saved['meta']['options']['sizes'] == [[64, 64]]
    table = (tmp_path / 'results.md').read_text().splitlines()
    assert table[0].endswith(', batch 2, fp32, inference')
    assert table[-1].startswith('| 64x64 | inline-swin-t@reference |')


def test_padding_aware_and_training_rows(tmp_path):
    rows = cli.main(['--device', 'cpu', '--sizes', '64', '--batches', '3', '--rounds', '1', *QUICK, '--padding-aware',
                     '--train', '--models', 'inline-pvt-t', '--out-dir', str(tmp_path)])
    assert [r['model'] for r in rows] == ['inline-pvt-t', 'inline-pvt-t-pa']
    assert all(r['step'] == 'train' and r['gflops'] is None for r in rows)     # FLOPs count forwards only


def test_padded_shapes_are_distinct_and_inside_the_batch():
    shapes = runs.padded_shapes((1120, 1120), 8)
    assert shapes[0] == (1120, 1120) and len(set(shapes)) == 8
    assert all(32 <= h <= 1120 and 32 <= w <= 1120 and h % 32 == 0 and w % 32 == 0 for h, w in shapes)
    x, given = runs.make_input((64, 96), 3, True, torch.device('cpu'))
    assert given == runs.padded_shapes((64, 96), 3)
    for image, (h, w) in zip(x, given, strict=True):
        assert image[:, h:].abs().sum() == 0 and image[:, :, w:].abs().sum() == 0 and image[:, h - 1, w - 1].all()


def test_cuda_graphs_refuse_training_and_a_cpu(capsys):
    with pytest.raises(SystemExit):
        parse_args(['--device', 'cpu', '--cuda-graphs', '--train'])
    assert '--cuda-graphs captures plain-mode inference' in capsys.readouterr().err
    with pytest.raises(SystemExit, match='--cuda-graphs needs a CUDA device'):
        cli.main(['--device', 'cpu', '--cuda-graphs', '--models', 'inline-swin-t'])


@pytest.mark.parametrize('latencies', [
    {64: [30.0]},                              # one model at one size
    {64: [30.0, 45.0, 38.0]},                  # three models at one size: less than a decade apart
    {64: [210.0, 212.0]},                      # nearly equal
    {64: [0.5, 900.0], 96: [1.0, 1800.0]},     # two sizes, several decades
])
def test_latency_plot_labels_its_axes_at_any_range(latencies):
    """Each axis of the latency and memory plot has at least two labelled ticks inside its view, each label the
    tick's value: at one size too, where the megapixels are one value and the latencies within one decade."""
    series = {}
    for side, values in latencies.items():
        for i, ms in enumerate(values):
            series.setdefault((f'model-{i}', 0, 1, 'fp32', 'infer', ''), []).append(
                dict(pixels=side * side, latency_ms=ms, peak_memory_mb=2 * ms))
    fig = plots.latency_memory_figure(series, report.SERIES, 'title')
    try:
        fig.canvas.draw()
        assert len(fig.axes) == 2
        for ax in fig.axes:
            for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
                shown = [(tick, label.get_text()) for tick, label in
                         zip(axis.get_majorticklocs(), axis.get_majorticklabels(), strict=True) if low <= tick <= high]
                assert len(shown) >= 2, (ax.get_ylabel(), shown)
                for tick, text in shown:
                    assert math.isclose(float(text.replace('\N{MINUS SIGN}', '-')), tick, rel_tol=1e-6), (tick, text)
    finally:
        plots._pyplot().close(fig)


# --- saved results -------------------------------------------------------------------------------------------------

def test_from_json_prints_the_saved_table(tmp_path, capsys):
    rows = cli.main(['--device', 'cpu', '--sizes', '64', '--rounds', '1', *QUICK, '--no-flops',
                     '--models', 'inline-swin-t', '--out-dir', str(tmp_path)])
    capsys.readouterr()
    assert cli.main(['--from-json', str(tmp_path / 'results.json')]) == rows
    assert capsys.readouterr().out == (tmp_path / 'results.md').read_text()


def test_from_json_reads_the_cpu_tool_before_it(tmp_path, capsys):
    """tools/benchmark_highres.py's results (docs/benchmarks/cpu_fp32): bare Swin names were mmdet's, every number
    printed as saved, the skipped runs said, the plot drawn."""
    path = osp.join(SAVED, 'cpu_fp32', 'results.json')
    saved = json.load(open(path))['results']
    rows = cli.main(['--from-json', path, '--out-dir', str(tmp_path)])
    out = capsys.readouterr().out
    assert list(dict.fromkeys(r['model'] for r in rows)) == ['inline-swin-t', 'inline-swin-s', 'inline-swin-b',
                                                            'mmdet:swin-t', 'mmdet:swin-s', 'mmdet:swin-b',
                                                            'swin-t-global']
    for old, new in zip(saved, rows, strict=True):
        assert new['latency_ms'] == old.get('latency_ms') and new['gflops'] == old.get('gflops')
        assert new['ratio_to_reference'] == old.get('ratio_to_reference') and new['step'] == 'infer'
    assert out.startswith('Intel(R) Xeon(R) Processor, torch 2.14.1+cu130, 2 threads, batch 1, fp32, inference\n')
    assert '| 512x512 | inline-swin-t | 261.2 (248.9-293.0) | 3.83 | 124 | 24.3 | 186 | 55% | 0.73 |' in out
    assert '| 2048x2048 | swin-t-global | skipped: predicted 316 s per run > --max-seconds 60 |' in out
    assert '* inline-swin-t (batch 1, fp32): latency ~ pixels^1.01 over 512x512..2048x2048' in out
    assert (tmp_path / 'latency_memory.png').stat().st_size > 10_000
    assert report.read_results(tmp_path / 'results.json')[1] == rows          # written in this tool's format


def test_from_json_reads_the_gpu_tool_before_it(tmp_path, capsys):
    """tools/benchmark_gpu.py's results (docs/benchmarks/gpu_h200_triton, the rows of several runs appended): bare
    swin-t and pvt-v2-b1 were timm's, 'NAME (padding-aware)' is NAME-pa, a run starts where a setting comes again;
    medians, ratios, references, launches and peaks as saved and as its own table printed them."""
    path = osp.join(SAVED, 'gpu_h200_triton', 'results.json')
    rows = cli.main(['--from-json', path])
    out = capsys.readouterr().out
    assert list(dict.fromkeys(r['model'] for r in rows)) == ['inline-swin-t', 'inline-swin-t@torch', 'timm:swin-t',
                                                            'inline-swin-t-pa', 'inline-pvt-t', 'inline-pvt-t@torch',
                                                            'timm:pvt-v2-b1']
    assert {r['reference'] for r in rows} == {'timm:swin-t', 'inline-swin-t', 'inline-pvt-t'}
    assert out.startswith('NVIDIA H200, torch 2.11.0+cu130, bf16\n')
    assert [r['run'] for r in rows] == [0] * 12 + [1] * 7
    old_table = open(osp.join(SAVED, 'gpu_h200_triton', 'results.md')).read().splitlines()[4:]
    new_table = out.split('\n\n')[1].splitlines()
    assert new_table[0].startswith('| run | size | batch | step | model |') and len(old_table) == len(new_table) - 2
    for old, new in zip(old_table, new_table[2:], strict=True):
        size, batch, _, step, _, median, _, ratio, launches, peak = (c.strip() for c in old.strip('|').split('|'))
        cells = [c.strip() for c in new.strip('|').split('|')]
        assert cells[1:4] == [size.replace('^2', f'x{size[:-2]}'), batch, step]
        assert cells[5].startswith(median if float(median) < 100 else f'{float(median):.1f}')
        assert cells[7:10] == [launches, peak, ratio]
    # one run's rows compared again, with another reference
    again = cli.main(['--from-json', path, '--reference', 'inline-swin-t@torch'])
    assert [r['ratio_to_reference'] for r in again if r['size'] == '6048x6048'] == pytest.approx(
        [65.367 / 106.763, 1, 123.099 / 106.763], rel=1e-4)


def test_from_json_merges_files_and_recomputes_ratios(tmp_path, capsys):
    """Two saved runs in one table (the device script's merge); --reference per family (the PVT run compared with
    mmdet's PVT); the window sweep's table from its saved rows."""
    pvt, sweep = (osp.join(SAVED, d, 'results.json') for d in ('cpu_pvt_fp32', 'cpu_window_sweep'))
    rows = cli.main(['--from-json', pvt, sweep, '--out-dir', str(tmp_path)])
    assert len(rows) == 16 and report.read_results(tmp_path / 'results.json')[1] == rows
    out = capsys.readouterr().out
    assert '| 56 | 224x224 | 16 | fp32 | 1.2 | 8.8 | 9.0 | 4.5 | 7.78x | 3.7x |' in out
    assert (tmp_path / 'window_sizes.png').stat().st_size > 10_000
    rows = cli.main(['--from-json', pvt, '--reference', 'mmdet:swin-t', 'mmdet:pvt-t'])
    ratio = {(r['model'], r['size']): r['ratio_to_reference'] for r in rows}
    assert ratio['mmdet:pvt-t', '800x1333'] == 1 and round(ratio['inline-pvt-t', '800x1333'], 2) == 0.31
    assert round(ratio['inline-swin-t', '1024x1024'], 2) == 0.80
    # the same run twice: two runs, each row compared within its own
    twice = cli.main(['--from-json', pvt, pvt, '--reference', 'mmdet:swin-t', 'mmdet:pvt-t'])
    assert [r['run'] for r in twice] == [0] * 8 + [1] * 8
    assert [r['ratio_to_reference'] for r in twice] == [r['ratio_to_reference'] for r in rows] * 2


def test_cuda_peak_memory_is_the_allocators_peak_above_the_start(monkeypatch):
    """On a GPU (stand-ins here): caches released, peak statistics reset, then max_memory_allocated after the call
    minus memory_allocated before it."""
    seen, allocated = [], iter([3 * 2 ** 20])
    monkeypatch.setattr(torch.cuda, 'synchronize', lambda device: seen.append('synchronize'))
    monkeypatch.setattr(torch.cuda, 'empty_cache', lambda: seen.append('empty_cache'))
    monkeypatch.setattr(torch.cuda, 'memory_allocated', lambda device: next(allocated))
    monkeypatch.setattr(torch.cuda, 'reset_peak_memory_stats', lambda device: seen.append('reset'))
    monkeypatch.setattr(torch.cuda, 'max_memory_allocated', lambda device: 7.5 * 2 ** 20)
    assert memory.cuda_peak_mb(lambda: seen.append('call'), torch.device('cuda')) == 4.5
    assert seen == ['synchronize', 'empty_cache', 'reset', 'call', 'synchronize']


@pytest.mark.parametrize('task', ['mask-rcnn', 'upernet'])
def test_a_task_without_models_takes_every_model_it_has_a_config_for(task):
    """``--task`` alone times the task's own models (the backbone default's mmdet Swin has no UperNet config)."""
    assert [str(n) for n in parse_args(['--task', task]).models] == list(names.TASK_CONFIGS[task])


def test_padding_aware_with_a_task_is_refused_naming_both_flags(capsys):
    with pytest.raises(SystemExit):
        parse_args(['--task', 'upernet', '--padding-aware'])
    assert '--padding-aware adds the backbones\' padding-aware twins' in capsys.readouterr().err

