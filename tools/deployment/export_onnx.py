"""Export a detector's/segmentor's backbone and neck, or a timm classifier, to ONNX and check the file in
onnxruntime against eager PyTorch; with ``--whole``, a trained segmentor or detector whole (heads and
post-processing included), checked against mmseg's / mmdet's inference: ``--whole --help`` and
``inline_backbones/deployment/tool.py``.

    python tools/deployment/export_onnx.py MODEL [--checkpoint FILE] [--shape H W] [--exporter dynamo|torchscript]
        [--dynamic MIN_H MIN_W MAX_H MAX_W] [--out FILE] [--cfg-options KEY=VALUE ...] [--backbone-only]
        [--features] [--repeats 5]

``MODEL`` is an mmdet/mmseg config of this repo (exported: ``extract_feat``, the backbone and neck, whose
outputs are the neck's maps, or with ``--backbone-only`` the backbone's stage maps; ``--checkpoint`` a
whole-model checkpoint; the backbone's pretrained ``init_cfg`` is not loaded) or a timm model name such
as ``inline_swin_tiny`` (exported: the logits; ``--checkpoint`` a released or timm-format file; with ``--features``
timm's ``features_only`` extractor, its stage maps). Random weights without ``--checkpoint``. A timm name needs no
OpenMMLab line (torch, timm, onnx, onnxscript and onnxruntime).

``--exporter dynamo`` (torch's default exporter) or ``torchscript`` (fixed size only); ``--dynamic``
(dynamo only) makes H and W symbolic multiples of 32 within the range, and the file is checked at both
``--shape`` and the range's largest size. Exporter and opset: see ``inline_backbones/deployment/onnx_export.py`` and
``docs/deployment.md``. Prints, per size, the largest relative error over the outputs
(``max |onnxruntime - eager| / max |eager|``), then the median latency at ``--shape`` of onnxruntime and
eager PyTorch (fp32, batch 1): ``--repeats`` rounds of one onnxruntime run then one eager forward, after one
untimed warm-up round, both runtimes on torch's thread count, and onnxruntime's idle threads not spinning
(``session.intra_op.allow_spinning`` and ``session.inter_op.allow_spinning`` '0'; spinning, they take the
cores from eager's threads in the next forward). Exits with status 1 if an error exceeds ``--tolerance``.
"""
import argparse
import os.path as osp
import statistics
import sys
import time

import torch

from inline_backbones.cli import ConfigOptions, exit_on_user_error, run_tool
from inline_backbones.data.tool_inputs import check_checkpoint, check_config
from inline_backbones.deployment.onnx_export import (
    EXPORTERS,
    OPSET,
    ExtractFeat,
    export_onnx,
    flat_outputs,
    onnxruntime_session,
    relative_errors,
    run_onnx,
    session_spins,
)
from inline_backbones.frameworks import require_openmmlab


def build_model(name, checkpoint=None, cfg_options=None, backbone_only=False, shape=None, dynamic=False,
                features=False):
    """(eval-mode module, description) for a config path or a timm model name (with ``features``: timm's
    ``features_only`` feature extractor, its stage maps; else the logits). A timm model built for one input size
    (``fixed_input_size`` in its pretrained cfg, as timm's ViT and InLine-DeiT) is built for ``shape`` (H, W), and
    with ``dynamic`` also takes the other sizes (``dynamic_img_size=True``: its position embedding resampled to each
    grid); the other models take any size as they are."""
    if name.endswith('.py'):
        from mmengine.registry import init_default_scope
        from mmengine.runner import load_checkpoint

        from inline_backbones.openmmlab.task_tools import read_config, task_of

        cfg = read_config(name)
        if cfg_options:
            cfg.merge_from_dict(cfg_options)
        task = task_of(cfg)
        if task == 'mmdet':
            from mmdet.registry import MODELS
            from mmdet.utils import register_all_modules
        else:
            from mmseg.registry import MODELS
            from mmseg.utils import register_all_modules
        register_all_modules(init_default_scope=False)
        init_default_scope(task)
        cfg.model.backbone.init_cfg = None
        if cfg.model.backbone.get('padding_aware'):
            # The exported graph takes one tensor; a single image that fills the input has nothing to mask, so
            # the mode changes nothing there (a padded batch needs the regions input: docs/deployment.md).
            print('note: padding-aware mode turned off for the export (model.backbone.padding_aware=False): '
                  'the file takes images that fill their input', flush=True)
            cfg.model.backbone.padding_aware = False
        model = MODELS.build(cfg.model)
        if checkpoint:
            load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
        if backbone_only:
            return model.backbone.eval(), f'{osp.basename(name)} backbone'
        return ExtractFeat(model).eval(), f'{osp.basename(name)} extract_feat (backbone + neck)'
    if cfg_options or backbone_only:
        raise SystemExit('--cfg-options and --backbone-only apply to configs, not to timm models')
    if features and checkpoint:
        raise SystemExit('--features exports a feature extractor of random weights; a --checkpoint goes with the '
                         'logits (without --features)')
    import timm

    import inline_backbones  # noqa: F401  (registers the inline_swin_* models with timm)
    kwargs = dict(pretrained=True, pretrained_cfg_overlay=dict(file=checkpoint)) if checkpoint else {}
    fixed = getattr(timm.models.get_pretrained_cfg(name.partition('.')[0]), 'fixed_input_size', False)
    if fixed and shape is not None:
        kwargs.update(img_size=tuple(shape), **(dict(dynamic_img_size=True) if dynamic else {}))
    if features:
        return timm.create_model(name, features_only=True, **kwargs).eval(), f'timm {name} features_only maps'
    return timm.create_model(name, **kwargs).eval(), f'timm {name} logits'


def median_latencies(model, session, x, repeats, warmup=1, clock=time.perf_counter):
    """Median seconds of onnxruntime and eager forwards on ``x``: ``warmup`` untimed rounds, then ``repeats``
    timed rounds of one onnxruntime run followed by one eager forward (interleaved: a change of the machine's
    load hits both alike). Each runtime must run alone: ``session`` must not spin (``onnxruntime_session(...,
    spinning=False)``) and must use torch's thread count, else ValueError."""
    threads = session.get_session_options().intra_op_num_threads
    if session_spins(session) or threads != torch.get_num_threads():
        raise ValueError(f'time onnxruntime against eager with a session whose idle threads do not spin and that '
                         f'uses torch\'s {torch.get_num_threads()} threads (onnxruntime_session(path, '
                         f'threads=torch.get_num_threads(), spinning=False)); this one spins: '
                         f'{session_spins(session)}, threads: {threads or "onnxruntime default"}')
    times = {'onnxruntime': [], 'eager': []}
    with torch.no_grad():
        for i in range(warmup + repeats):
            for name, run in (('onnxruntime', lambda: run_onnx(session, x)), ('eager', lambda: model(x))):
                start = clock()
                run()
                if i >= warmup:
                    times[name].append(clock() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    if '--whole' in (sys.argv[1:] if argv is None else argv):   # the whole model: inline_backbones.deployment.tool
        with exit_on_user_error('export_onnx'):
            require_openmmlab('--whole (a trained mmdet/mmseg model, exported whole)')
        from inline_backbones.deployment.tool import main as export_whole_model

        return export_whole_model(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('model', help='mmdet/mmseg config file or timm model name')
    parser.add_argument('--checkpoint')
    parser.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'), default=(800, 1344))
    parser.add_argument('--exporter', choices=EXPORTERS, default='dynamo')
    parser.add_argument('--dynamic', type=int, nargs=4, metavar=('MIN_H', 'MIN_W', 'MAX_H', 'MAX_W'),
                        help='symbolic H and W (multiples of 32) within this range (dynamo only)')
    parser.add_argument('--out', help='ONNX file (default: <model name>_<exporter>.onnx)')
    parser.add_argument('--cfg-options', action=ConfigOptions, help='config overrides, key=value')
    parser.add_argument('--backbone-only', action='store_true', help="configs: the backbone, without the neck")
    parser.add_argument('--features', action='store_true',
                        help="timm names: the feature extractor (features_only: the stage maps), not the logits")
    parser.add_argument('--repeats', type=int, default=5,
                        help='timed rounds, one forward of each runtime per round (0: no timing)')
    parser.add_argument('--tolerance', type=float, default=1e-5, help='largest relative error accepted')
    args = parser.parse_args(argv)
    dynamic = None
    if args.dynamic:
        dynamic = (tuple(args.dynamic[:2]), tuple(args.dynamic[2:]))
        if not all(lo <= s <= hi for lo, s, hi in zip(dynamic[0], args.shape, dynamic[1], strict=True)):
            parser.error(f'--shape {args.shape} lies outside the --dynamic range {dynamic}')
        if args.exporter != 'dynamo':
            parser.error('--dynamic needs --exporter dynamo (the TorchScript exporter exports one fixed size)')
    out = args.out or f'{osp.splitext(osp.basename(args.model))[0]}_{args.exporter}.onnx'
    with exit_on_user_error('export_onnx'):   # before any model is built: one line, status 1
        if args.model.endswith('.py'):
            require_openmmlab(f'{args.model} (an mmdet/mmseg config; a timm name needs none)')
            check_config(args.model)
        if args.checkpoint:
            check_checkpoint(args.checkpoint)

    if args.features and args.model.endswith('.py'):
        parser.error('--features applies to timm names (a config exports the backbone and neck, or --backbone-only)')
    model, what = build_model(args.model, args.checkpoint, args.cfg_options, args.backbone_only, args.shape,
                              dynamic is not None, args.features)
    torch.manual_seed(0)
    x = torch.randn(1, 3, *args.shape)
    try:   # the model's own input checks (size, channels) in one line, before any exporter runs
        with torch.no_grad():
            model(x)
    except (ValueError, TypeError) as err:
        parser.error(f'--shape {args.shape[0]} {args.shape[1]}: {err}')
    size = 'H, W dynamic within {}x{} .. {}x{}'.format(*dynamic[0], *dynamic[1]) if dynamic else 'fixed size'
    print(f'exporting {what} at {args.shape[0]}x{args.shape[1]} ({size}) with the {args.exporter} exporter, '
          f'opset {OPSET}, to {out}', flush=True)
    start = time.perf_counter()
    try:
        export_onnx(model, x, out, args.exporter, dynamic=dynamic)
    except (ValueError, NotImplementedError) as err:   # refused before exporting: say why in one line
        parser.error(str(err))
    print(f'exported in {time.perf_counter() - start:.1f} s', flush=True)

    session = onnxruntime_session(out, threads=torch.get_num_threads(), spinning=False)
    worst = 0.
    for hw in [tuple(args.shape)] + ([dynamic[1]] if dynamic and dynamic[1] != tuple(args.shape) else []):
        inputs = x if hw == tuple(args.shape) else torch.randn(1, 3, *hw)
        with torch.no_grad():
            errors = relative_errors(run_onnx(session, inputs), flat_outputs(model(inputs)))
        worst = max(worst, *errors)
        print(f'{hw[0]}x{hw[1]}: max relative error {max(errors):.2e} over {len(errors)} outputs '
              f'(max |onnxruntime - eager| / max |eager| per output)', flush=True)
    if args.repeats:
        latency = median_latencies(model, session, x, args.repeats)
        print(f'median latency at {args.shape[0]}x{args.shape[1]} ({args.repeats} interleaved rounds after 1 '
              f'warm-up, {torch.get_num_threads()} threads each, onnxruntime not spinning): '
              f'onnxruntime {latency["onnxruntime"] * 1e3:.1f} ms, eager {latency["eager"] * 1e3:.1f} ms', flush=True)
    if worst > args.tolerance:
        print(f'FAILED: relative error {worst:.2e} exceeds {args.tolerance:.0e}', file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    run_tool(main, 'export_onnx')
