"""The benchmark's command line: its options, their defaults and the checks made before anything is built."""
import argparse

import torch

from ..frameworks import EXTRAS_HINT, openmmlab_installed
from .names import FAMILIES, GRAMMAR, TASK_CONFIGS, OtherLibraryName, padding_aware_twin, parse

SIZES = ['512x512', '800x1333', '1024x1024', '1536x1536', '2048x2048']
DEFAULT_MODELS = ['inline-swin-t', 'inline-swin-s', 'inline-swin-b', 'mmdet:swin-t', 'mmdet:swin-s', 'mmdet:swin-b',
                  'swin-t-global']
# --dtype modes: name -> (dtype, pure). pure: weights and input cast; otherwise autocast to dtype.
MODES = {'fp32': (torch.float32, False), 'bf16': (torch.bfloat16, False), 'bf16-pure': (torch.bfloat16, True),
         'fp16': (torch.float16, False), 'fp16-pure': (torch.float16, True)}

FAMILY_LINES = '\n'.join(f'  {family:6} {", ".join(models)}' for family, models in FAMILIES.items())
DESCRIPTION = f"""Benchmark high-resolution inference (and training steps) of backbones and whole models.

    python tools/analysis_tools/benchmark.py [--models NAME ...] [--sizes HxW|S ...] [--batches B ...]
        [--dtype fp32 bf16 bf16-pure fp16 fp16-pure] [--device auto|cpu|cuda] [--rounds 5] [--warmup 1]
        [--padding-aware] [--train] [--compile | --cuda-graphs] [--profile TOP] [--channels-last]
        [--task backbone|mask-rcnn|upernet] [--window-sizes W ...] [--no-memory] [--no-flops] [--gemm-size N]
        [--max-seconds 60] [--reference NAME ...] [--out-dir outputs/benchmark]
    python tools/analysis_tools/benchmark.py --from-json RESULTS.json [...] [--reference NAME ...] [--out-dir DIR]

How it times: for every (size, batch), each model in each --dtype mode is called once per round, --rounds rounds
after --warmup untimed ones (interleaved, so that a shared machine's drifts fall on all models alike); one call is
timed with CUDA events on a GPU and with the wall clock on a CPU; reported: the median and the min-max. Random
weights, random inputs (standard normal), no drop path.

Columns: latency ms (median, min-max) and images/s; x REF: the latency over the reference's in the same rounds,
below 1 = faster (the column is titled x NAME when every ratio is against NAME, else x ref beside a ref column
naming each row's reference); fp32/this: the same model's fp32 latency over this one (when fp32 is among the modes);
peak MB: memory of one call beyond the model and its input (CUDA: max_memory_allocated; CPU: growth of the peak
RSS in a fresh process; --no-memory skips it); launches: CUDA kernels one call launches (the profiler's count,
GPU only); GFLOPs (one FLOP = one multiply-add, mmengine's analysis with the attention matmuls and the dynamic
depthwise conv counted; forward only, so not for --train), GFLOP/s = 2 x multiply-adds / latency, and %GEMM: that
rate over a square GEMM of the same dtype (2048^3 on a CPU, 8192^3 on CUDA, --gemm-size) timed in the same rounds
(--no-flops skips the three). A run whose predicted time (from the previous size) exceeds --max-seconds is skipped
and said so; a model that fails in a mode (out of memory, a dtype it cannot run) is reported as skipped.

Modes (--dtype, several timed in the same rounds): fp32; bf16 / fp16: autocast (fp32 weights); bf16-pure /
fp16-pure: model and input cast (mmdet's Swin cannot: its attention masks stay fp32). fp16 on a CPU is refused
unless it has avx512_fp16 or amx_fp16 (torch would emulate it, hundreds of times slower).

Options: --padding-aware: a batch of images of different sizes (from the full size down to 60%, zero-padded),
and each of this package's models beside its padding-aware twin (NAME-pa, given each image's size). --train: one
forward + backward (loss: the sum of the outputs' means) per call. --compile: torch.compile(model, dynamic=True)
(the warm-up includes compilation). --cuda-graphs: each model captured once and replayed
(inline_backbones.deployment.cuda_graph.CUDAGraphBackbone; inference, plain mode). --profile TOP: the TOP kernels
(CPU ops on a CPU) of one call, per model. --task mask-rcnn|upernet: whole models from the configs.
--window-sizes 7 14 28 56: the paper's Fig. 3, timm:swin-t-w{{w}} against inline-swin-t-w{{w}} for each w (at
224x224 unless --sizes), with window_sizes.png and a table beside the paper's GPU speed-ups.

Writes results.json, results.csv, results.md (the printed Markdown) and latency_memory.png to --out-dir.
--from-json reads results.json files of this tool and of the two it replaced (tools/benchmark_highres.py,
tools/benchmark_gpu.py; their model names translated to this grammar), several merged into one table (a run column
tells their runs apart: ratios are taken within a run), prints the report and, with --out-dir, writes the files;
--reference recomputes the ratios from the saved latencies.

The reference of each row's ratio (x REF). The families:
{FAMILY_LINES}
Without --reference: per family, its first model of another library (prefixed), else its first model (each row
against a model of its own family). --reference NAME ... (at most one per family): each row against the NAME of its
own family, else against the first NAME (--reference mmdet:swin-t: every row against mmdet:swin-t, the PVT and
CSwin rows too).

Numeric options: --rounds, --batches, --window-sizes, --gemm-size and the sides of --sizes are integers >= 1;
--warmup and --profile integers >= 0 (0: none); --max-seconds a number > 0.

{GRAMMAR}
"""


def parse_size(text):
    """``'800x1333'`` -> (800, 1333); ``'1120'`` -> (1120, 1120); sides integers >= 1."""
    try:
        sides = [int(v) for v in text.lower().split('x')]
    except ValueError:
        sides = []
    if len(sides) not in (1, 2) or min(sides) < 1:
        raise argparse.ArgumentTypeError(f'size {text!r}: give HxW (800x1333) or one side (1120), sides integers >= 1')
    return sides[0], sides[-1]


def _integer_at_least(low):
    """An argparse type: the integer of the text, refused (naming the range) below ``low``."""
    def integer(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f'expected an integer >= {low}, got {text!r}')
        return value
    return integer


positive_int, non_negative_int = _integer_at_least(1), _integer_at_least(0)


def positive_float(text):
    """An argparse type: the number of the text, refused (naming the range) unless it is above 0 (NaN refused)."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value > 0:
        raise argparse.ArgumentTypeError(f'expected a number > 0, got {text!r}')
    return value


def build_parser():
    parser = argparse.ArgumentParser(description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--models', nargs='+', metavar='NAME',
                        help=f'models to time (default: {" ".join(DEFAULT_MODELS)}; with --task, every model '
                             'that task has a config for)')
    parser.add_argument('--sizes', nargs='+', type=parse_size, metavar='HxW',
                        help='input sizes, HxW or one side (default: 512x512 800x1333 1024x1024 1536x1536 2048x2048; '
                        '224x224 with --window-sizes)')
    parser.add_argument('--batches', nargs='+', type=positive_int, default=[1], metavar='B',
                        help='batch sizes, >= 1 (default: 1)')
    parser.add_argument('--dtype', nargs='+', choices=list(MODES), default=['fp32'],
                        help='modes timed in the same rounds (default: fp32)')
    parser.add_argument('--device', default='auto', help='auto (CUDA if present), cpu, cuda, cuda:1, ...')
    parser.add_argument('--rounds', type=positive_int, default=5, help='timed rounds, >= 1 (default: 5)')
    parser.add_argument('--warmup', type=non_negative_int, default=1,
                        help='untimed rounds first, >= 0 (default: 1; on a GPU give 3: Triton kernels, cuBLAS/cuDNN '
                        'choices)')
    parser.add_argument('--padding-aware', action='store_true',
                        help='a batch of images of different sizes; InLine models beside their padding-aware twins')
    parser.add_argument('--train', action='store_true', help='time forward + backward (backbones only)')
    capture = parser.add_mutually_exclusive_group()
    capture.add_argument('--compile', action='store_true', help='torch.compile(model, dynamic=True) every model')
    capture.add_argument('--cuda-graphs', action='store_true', help='capture each model in a CUDA graph and replay')
    parser.add_argument('--profile', type=non_negative_int, default=0, metavar='TOP',
                        help='print the TOP kernels of one call, >= 0 (default: 0, no profile)')
    parser.add_argument('--channels-last', action='store_true', help='channels-last model and input')
    parser.add_argument('--task', choices=['backbone', *TASK_CONFIGS], default='backbone',
                        help='whole models from the configs instead of backbones')
    parser.add_argument('--window-sizes', nargs='+', type=positive_int, metavar='W',
                        help="the paper's Fig. 3: timm:swin-t-w{w} against inline-swin-t-w{w} for each w >= 1")
    parser.add_argument('--no-memory', dest='memory', action='store_false', help='skip the peak-memory probes')
    parser.add_argument('--no-flops', dest='flops', action='store_false',
                        help='skip FLOP counts and the GEMM yardstick')
    parser.add_argument('--gemm-size', type=positive_int, help='side of the square GEMM yardstick, >= 1 (default: 8192 '
                        'on CUDA, 2048 on a CPU; smaller only for quick checks: small GEMMs run below peak)')
    parser.add_argument('--max-seconds', type=positive_float, default=60.,
                        help='skip runs predicted to take longer, > 0 (default: 60)')
    parser.add_argument('--reference', nargs='+', metavar='NAME',
                        help="what the ratio column divides by: each row's latency by its own family's NAME, or by "
                        "the first NAME where none is of its family (default: per family, its first model of another "
                        "library, else its first model)")
    parser.add_argument('--out-dir', help='where the files go (default: outputs/benchmark; none with --from-json)')
    parser.add_argument('--from-json', nargs='+', metavar='RESULTS', help='report saved results.json files')
    return parser


def refusal(name, args):
    """Why the command line ``args`` (its ``task``) cannot time the model ``name``, naming what it can; None if it
    can."""
    if not openmmlab_installed() and (args.task != 'backbone' or name.library in ('mmdet', 'mmseg')):
        what = f'--task {args.task}' if args.task != 'backbone' else f'{str(name)!r}'
        return (f'{what} needs an OpenMMLab line, and none is installed: {EXTRAS_HINT}; without one, time this '
                'package\'s backbones and timm:* names')
    if args.task != 'backbone':
        configs = TASK_CONFIGS[args.task]
        if str(name) not in configs:
            return f'no {args.task} config for {str(name)!r}; choose from {", ".join(configs)}'
    elif name.library == 'mmseg':
        return "mmseg's Swin is timed inside UperNet (--task upernet); as a backbone use mmdet:swin-*"
    return None


def _whose(err, args, among=None):
    """The refusal of a bare name of other libraries' models (``err``): the prefixed names that this command line
    takes in its place (with ``among``, the names they must be one of: --reference's are among --models), else the
    flags under which each of them is taken."""
    head = f'model {err.text!r} is another library\'s'
    fits = err.candidates if args.from_json else [c for c in err.candidates if refusal(parse(c), args) is None]
    if among is not None and fits:
        listed = [c for c in fits if parse(c) in among]
        if not listed:
            return f'{head}, and none of {", ".join(fits)} is among --models: add the one you mean to --models'
        fits = listed
    if fits:
        return f'{head}: say whose, {" or ".join(fits)}'
    ways = []
    for candidate in err.candidates:
        tasks = [t for t in ('backbone', *TASK_CONFIGS)
                 if refusal(parse(candidate), argparse.Namespace(task=t)) is None]
        ways.append(f'{candidate} ' + ' or '.join('without --task' if t == 'backbone' else f'with --task {t}'
                                                  for t in tasks))
    return f'{head}, and none of {", ".join(err.candidates)} runs with --task {args.task}: {"; ".join(ways)}'


def _names(parser, flag, texts, args, among=None):
    """The parsed names of ``texts`` (those given to ``flag``); an unknown or bare other library's name ends the
    command with argparse's error, the latter naming what this command line takes in its place (:func:`_whose`)."""
    names = []
    for text in texts or ():
        try:
            names.append(parse(text))
        except OtherLibraryName as err:
            parser.error(f'argument {flag}: {_whose(err, args, among)}')
        except ValueError as err:
            parser.error(f'argument {flag}: {err}')
    return names


def _references(parser, args, among=None):
    """``--reference``'s names (None if not given), at most one per family; with ``among``, all of them among it."""
    references = _names(parser, '--reference', args.reference, args, among)
    for family in dict.fromkeys(r.family for r in references):
        same = [str(r) for r in references if r.family == family]
        if len(same) > 1:
            parser.error(f'--reference {" ".join(same)}: one per family ({family}: {", ".join(FAMILIES[family])})')
    missing = [str(r) for r in references if among is not None and r not in among]
    if missing:
        parser.error(f'--reference {" ".join(missing)}: not among --models')
    return references or None


def parse_args(argv=None):
    """The command line (``argv``: a list, or ``sys.argv``), checked; ``models`` and ``reference`` as parsed names
    (:class:`~.names.Name`; with ``--padding-aware``, each of this package's models followed by its padding-aware
    twin), ``sizes`` as (H, W) pairs, ``device`` resolved."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.device == 'auto':
        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    try:
        torch.device(args.device)
    except RuntimeError as err:
        parser.error(f'--device {args.device!r}: {err}')
    if args.from_json:
        args.reference = _references(parser, args)
        return args
    if args.window_sizes:
        if args.task != 'backbone' or args.models:
            parser.error('--window-sizes chooses the models (timm:swin-t-w{w}, inline-swin-t-w{w}): drop --models '
                         'and --task')
        args.models = [parse(f'{m}-w{w}') for w in args.window_sizes for m in ('timm:swin-t', 'inline-swin-t')]
    if args.task != 'backbone' and args.train:
        parser.error('--train times backbones: drop --task')
    if args.task != 'backbone' and args.padding_aware:
        parser.error('--padding-aware adds the backbones\' padding-aware twins, which have no whole-model config: '
                     'drop --task (or --padding-aware); the configs choose the mode themselves')
    if not args.window_sizes:
        default = DEFAULT_MODELS if args.task == 'backbone' else list(TASK_CONFIGS[args.task])
        if args.task == 'backbone' and not openmmlab_installed():   # mmdet's Swin needs a line: timm's in its place
            default = [m for m in default if not m.startswith(('mmdet:', 'mmseg:'))] + ['timm:swin-t']
        args.models = _names(parser, '--models', args.models, args) or [parse(m) for m in default]
    if args.flops and not args.train and not openmmlab_installed():
        print('note: no FLOPs, MACs/s or GEMM yardstick: they are counted by mmengine\'s FlopAnalyzer, and no '
              'OpenMMLab line is installed (--no-flops says so without this note)', flush=True)
        args.flops = False
    if args.padding_aware:
        args.models = list(dict.fromkeys(n for name in args.models for n in (name, padding_aware_twin(name)) if n))
    args.sizes = args.sizes or [parse_size(s) for s in (['224x224'] if args.window_sizes else SIZES)]
    for name in args.models:
        if refusal(name, args):
            parser.error(refusal(name, args))
    if args.cuda_graphs and (args.train or args.padding_aware or any(n.padding_aware for n in args.models)):
        parser.error('--cuda-graphs captures plain-mode inference: not with --train or --padding-aware')
    args.reference = _references(parser, args, among=args.models)
    return args
