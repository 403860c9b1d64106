"""The benchmark's command (``tools/analysis_tools/benchmark.py``): options -> timed rows or saved ones -> report."""
import torch

from . import environment, report, runs
from .options import MODES, parse_args


def check_device(args, device):
    """What the device must offer: CUDA graphs need CUDA; fp16 on a CPU needs native fp16 arithmetic (otherwise torch
    emulates it, hundreds of times slower than fp32)."""
    if args.cuda_graphs and device.type != 'cuda':
        raise SystemExit('--cuda-graphs needs a CUDA device (CUDA graphs run on NVIDIA GPUs only)')
    if device.type == 'cpu' and any(MODES[m][0] == torch.float16 for m in args.dtype):
        if not environment.cpu_flags() & {'avx512_fp16', 'amx_fp16'}:
            raise SystemExit('--dtype fp16/fp16-pure on this CPU: it has neither avx512_fp16 nor amx_fp16, so torch '
                             'would emulate fp16 (hundreds of times slower than fp32); use bf16 or --device cuda')


def main(argv=None):
    """Run the command line ``argv`` (a list, or ``sys.argv``): print the report, write the files; the rows."""
    args = parse_args(argv)
    if args.from_json:
        metas, rows = [], []
        for path in args.from_json:           # each file's runs numbered after the previous files'
            file_metas, file_rows = report.read_results(path)
            first = max((r['run'] for r in rows), default=-1) + 1
            metas += file_metas
            rows += [dict(r, run=first + r['run']) for r in file_rows]
        if args.reference:
            report.add_ratios(rows, args.reference)
    else:
        device = torch.device(args.device)
        check_device(args, device)
        rows = runs.benchmark(args, device)
        report.add_ratios(rows, args.reference or report.default_references(args.models))
        metas = [report.run_meta(args, device)]
        args.out_dir = args.out_dir or 'outputs/benchmark'
    print(report.markdown(metas, rows), end='')
    if args.out_dir:
        print('wrote ' + ', '.join(report.write(args.out_dir, metas, rows)))
    return rows
