"""ONNX export gives eager's numbers: every family and token mixer through both torch exporters (the default one with
dynamic sizes, checked at the example and at other sizes) and ``torch.jit.trace``; the graph form of the window
partition; the timm classifier; a Mask R-CNN config's backbone + neck; padding-aware mode with the regions as an
input; one file on both sides of Swin's small-map rule, through ``torch.onnx.export`` itself. Small random models."""
import importlib
import os
import os.path as osp
import sys
from collections.abc import Callable
from typing import NamedTuple

import pytest
import timm
import torch
from padding_cases import randomized, small_backbone
from tool_modules import load_tool

from inline_backbones import InLineCSwinTransformer, InLineDeiTClassifier, InLinePVT, InLineSwinTransformer
from inline_backbones.deployment.onnx_export import (
    ExtractFeat,
    export_onnx,
    flat_outputs,
    onnxruntime_session,
    relative_errors,
    run_onnx,
    session_spins,
    size_dims,
)
from inline_backbones.models.tokens.graph_mode import (
    exporting,
    exporting_or_tracing,
    may_branch_on_size,
    regions_in_graph,
)

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
TOL = 1e-5                                   # max |onnx - eager| / max |eager|, per output
SIZE, SECOND_SIZE = (64, 96), (96, 128)      # stage maps 16x24 .. 2x3 and 24x32 .. 3x4
DYNAMIC = (SIZE, SECOND_SIZE)                # H in {64, 96}, W in {96, 128}: the same window choices
# Every mixer on the small T/S/B trunks (embed 16) with softmax windows of 3, so stage 3 has shifted, padded
# windows (4x6 and 6x8 maps) and stage 4 unshifted padded ones (2x3, 3x4: Swin's small-map rule). Export time
# grows with the block count (about 1.8 s a block through the dynamo exporter on 2 cores), so each stage has
# the blocks its mixers need and no more: global InLine and linear attention are the same in every block; a
# windowed stage needs a second block to have a shifted one (IIMS2's stage 3: InLine, InLine, softmax, shifted
# softmax); InLine in windows of 8 shifts on stage 1's 16x24 map only. IIIS and IISS keep two blocks in stage 4:
# the small-map-rule tests need its shifted block.
MIXERS = {
    'IIIS': dict(preset='tiny', depths=[1, 1, 1, 2]),                            # global InLine + window softmax
    'IISS': dict(preset='small', depths=[1, 1, 2, 2]),
    'IIMS2': dict(preset='base', depths=[1, 1, 4, 1]),                           # mixed stage: InLine then softmax
    'IIIS-w8': dict(preset='tiny', depths=[2, 1, 1, 1], inline_window_size=8),   # InLine in (rolled) windows of 8
    'LLLS': dict(preset='tiny', depths=[1, 1, 1, 1], attn_type='LLLS'),          # plain linear attention
}


def require(name):
    """Import ``name``; without it the test is skipped, unless ``CI`` is set (then it fails)."""
    if os.environ.get('CI'):
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f'{name} is not installed (see requirements-test.txt)')


@pytest.fixture
def onnx_stack():
    for name in ('onnx', 'onnxscript', 'onnxruntime'):
        require(name)


def mixer_backbone(name):
    kwargs = dict(MIXERS[name])
    return small_backbone(kwargs.pop('preset'), window_size=3, **kwargs)


def eager(model, x):
    with torch.no_grad():
        return flat_outputs(model(x))


def onnx_errors(model, path, sizes):
    """Relative errors of the file against eager at each size (one list per size)."""
    session = onnxruntime_session(path)
    errors = []
    for hw in sizes:
        x = torch.randn(1, 3, *hw)
        errors.append(relative_errors(run_onnx(session, x), eager(model, x)))
    return errors


def test_graph_mode_predicates():
    seen = {}

    def record(x):
        seen[torch.jit.is_tracing()] = (exporting_or_tracing(), may_branch_on_size(), exporting())
        return x + 1

    record(torch.zeros(1))
    torch.jit.trace(record, torch.zeros(1))
    assert seen == {False: (False, True, False), True: (True, False, False)}
    compiled = torch.compile(lambda x: x + exporting_or_tracing() + 2 * may_branch_on_size() + 4 * regions_in_graph(),
                             backend='eager')
    assert compiled(torch.zeros(1)).item() == 5       # captured, branch-free on sizes, regions a graph input


@pytest.mark.slow
@pytest.mark.parametrize('mixer', MIXERS)
def test_trace_and_torchscript_export_equal_eager(mixer, onnx_stack, tmp_path):
    """The TorchScript exporter once dropped InLine's in-place accumulation (errors of 3e-2 to 5e-2).
    It cannot export InLine in windows, and says so."""
    model, x = mixer_backbone(mixer), torch.randn(1, 3, *SIZE)
    with torch.no_grad():
        traced = torch.jit.trace(model, x)
    assert max(relative_errors(eager(traced, x), eager(model, x))) < TOL
    if 'inline_window_size' in MIXERS[mixer]:
        with pytest.raises(NotImplementedError, match='InLine attention in windows.*dynamo=True'):
            export_onnx(model, x, tmp_path / 'model.onnx', 'torchscript')
        return
    export_onnx(model, x, tmp_path / 'model.onnx', 'torchscript')
    assert max(onnx_errors(model, tmp_path / 'model.onnx', [SIZE])[0]) < TOL


@pytest.mark.slow
@pytest.mark.parametrize('mixer', ['IIMS2', 'IIIS-w8', 'LLLS'])   # IIMS2 holds IIIS's and IISS's mixers
def test_dynamo_export_with_dynamic_size_equals_eager(mixer, onnx_stack, tmp_path):
    """InLine in windows exports at a fixed size only, and says so."""
    model, x, dynamic = mixer_backbone(mixer), torch.randn(1, 3, *SIZE), DYNAMIC
    if 'inline_window_size' in MIXERS[mixer]:
        with pytest.raises(Exception, match='exports at a fixed size only'):
            export_onnx(model, x, tmp_path / 'model.onnx', 'dynamo', dynamic=dynamic)
        dynamic = None
    export_onnx(model, x, tmp_path / 'model.onnx', 'dynamo', dynamic=dynamic)
    errors = onnx_errors(model, tmp_path / 'model.onnx', [SIZE, SECOND_SIZE] if dynamic else [SIZE])
    assert max(max(e) for e in errors) < TOL, errors


@pytest.mark.parametrize('exporter', [pytest.param('dynamo', marks=pytest.mark.slow), 'torchscript'])
def test_timm_classifier_exports(exporter, onnx_stack, tmp_path):
    torch.manual_seed(0)
    model = timm.create_model('inline_swin_tiny', embed_dims=16, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8),
                              num_classes=10).eval()
    dynamic = DYNAMIC if exporter == 'dynamo' else None
    export_onnx(model, torch.randn(1, 3, *SIZE), tmp_path / 'model.onnx', exporter, dynamic=dynamic)
    errors = onnx_errors(model, tmp_path / 'model.onnx', [SIZE, SECOND_SIZE] if dynamic else [SIZE])
    assert max(max(e) for e in errors) < TOL, errors


@pytest.mark.parametrize('exporter', [pytest.param('dynamo', marks=pytest.mark.slow), 'torchscript'])
def test_mask_rcnn_config_features_export(exporter, onnx_stack, tmp_path):
    """``extract_feat`` (backbone + FPN) of the Mask R-CNN InLine-Swin-T config on a small trunk."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    register_all_modules(init_default_scope=False)
    init_default_scope('mmdet')
    cfg = Config.fromfile(osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py'))
    arch = dict(embed_dims=16, depths=[1, 1, 2, 1], num_heads=[1, 2, 4, 8], attn_type='IIIS')
    cfg.model.backbone.update(arch=arch, init_cfg=None, padding_aware=False)
    cfg.model.neck.update(in_channels=[16, 32, 64, 128], out_channels=16)
    torch.manual_seed(0)
    model = ExtractFeat(MODELS.build(cfg.model)).eval()
    dynamic = DYNAMIC if exporter == 'dynamo' else None
    export_onnx(model, torch.randn(1, 3, *SIZE), tmp_path / 'model.onnx', exporter, dynamic=dynamic)
    errors = onnx_errors(model, tmp_path / 'model.onnx', [SIZE, SECOND_SIZE] if dynamic else [SIZE])
    assert all(len(e) == 5 for e in errors) and max(max(e) for e in errors) < TOL, errors


@pytest.mark.slow
@pytest.mark.mutation
@pytest.mark.parametrize('exporter', ['dynamo', 'torchscript'])
def test_padding_aware_backbone_exports_with_the_regions_as_an_input(exporter, onnx_stack, tmp_path):
    """The regions are the second input: the file gives each image's own features for other regions (and,
    dynamo, another size) than the example's; without the regions export is refused."""
    model = small_backbone('tiny', depths=[1, 1, 1, 2], padding_aware=True)   # stages 1-3 global InLine: one block
    with pytest.raises(Exception, match='image_shapes a \\(B, 2\\) integer tensor'):   # wrapped by the dynamo exporter
        export_onnx(model, torch.randn(1, 3, *SIZE), tmp_path / 'refused.onnx', exporter)
    assert not (tmp_path / 'refused.onnx').exists()
    # The windows of a padding-aware map lie on a canvas a shift larger than the map: at these sizes every
    # stage has at least two windows per side (a count of 1 at the example's size would be specialised).
    size, second = (128, 160), (160, 192)
    x, shapes = torch.randn(2, 3, *size), torch.tensor([size, (size[0] - 40, size[1] - 70)])
    dynamic = (size, second) if exporter == 'dynamo' else None
    export_onnx(model, x, tmp_path / 'model.onnx', exporter, dynamic=dynamic, image_shapes=shapes)
    session = onnxruntime_session(tmp_path / 'model.onnx')
    cases = [(size, [(size[0] - 9, size[1] - 33), (33, 45)])]
    if dynamic:
        cases.append((second, [(second[0] - 17, 70), second]))
    for hw, regions in cases:
        regions = torch.tensor(regions)
        images = torch.randn(2, 3, *hw)
        with torch.no_grad():
            reference = eager(lambda t, regions=regions: model(t, image_shapes=regions), images)
        errors = relative_errors(run_onnx(session, images, regions), reference)
        assert len(errors) == 4 and max(errors) < TOL, (hw, errors)


# Stage 4 of mixer_backbone('IIIS') (stride 32, softmax windows of 3, a shifted second block) on both sides of
# Swin's small-map rule: maps smaller than the window (2x3), equal to it (3x3), larger on one side only (3x8: not
# shifted), larger on both (4x5, 8x6: shifted by 1).
SMALL_MAP_RULE_SIZES = [(64, 96), (96, 96), (96, 256), (128, 160), (256, 192)]


def shifted_stage4_changes(model, hw):
    """max relative change of eager's stage-4 output at ``hw`` when its shifted block is made unshifted: what a graph
    that kept the other side of the small-map rule would get wrong there."""
    x = torch.randn(1, 3, *hw)
    block = model.layers[3].blocks[1].attn
    with torch.no_grad():
        shifted = model(x)[3]
        block.shift = False
        try:
            unshifted = model(x)[3]
        finally:
            block.shift = True
    return ((shifted - unshifted).abs().max() / shifted.abs().max()).item()


@pytest.mark.parametrize('hw', [(2, 5), (3, 3), (3, 7), (4, 4), (5, 8), (8, 6)])
def test_graph_form_of_the_shift_rule_equals_eager(hw, monkeypatch):
    """Under export a shifted block's shift is a 0-d tensor computed in the graph (``ws // 2`` where
    ``min(H, W) > ws``, else 0), its roll an index gather and its seam mask (all zeros for a shift of 0) always
    added: the same outputs as eager's Python choice, on maps smaller than, equal to and larger than the window."""
    from inline_backbones.models.mixers.window_attention import WindowAttention
    from inline_backbones.models.tokens import token_map

    torch.manual_seed(0)
    attn = WindowAttention(16, 2, window_size=3, shift=True).eval()
    torch.nn.init.normal_(attn.relative_position_bias_table)
    x = torch.randn(2, hw[0] * hw[1], 16)
    with torch.no_grad():
        tokens = token_map.TokenMap.of(x, hw)
        eager_shift, eager_out = tokens.shift_size(3, True), attn(x, tokens)
        monkeypatch.setattr(token_map, 'exporting', lambda: True)
        tokens = token_map.TokenMap.of(x, hw)
        graph_shift, graph_out = tokens.shift_size(3, True), attn(x, tokens)
    assert eager_shift == (1 if min(hw) > 3 else 0)
    assert isinstance(graph_shift, torch.Tensor) and graph_shift.dim() == 0 and graph_shift.item() == eager_shift
    torch.testing.assert_close(graph_out, eager_out, rtol=0, atol=1e-6)


def test_the_small_map_rule_sizes_straddle_the_rule():
    """Case ``swin`` of :data:`EXPORT_CASES` exports from a 96x128 example, whose stage-4 map is 3x4 (not shifted: as
    InLine-Swin-T's 7x10 at 224x320; such a file used to keep the example's unshifted windows at every size, errors of
    0.2-0.3 where stage 4 shifts). Its sizes straddle the rule: unshifting stage 4 changes nothing where it does not
    shift, a lot where it does."""
    model = mixer_backbone('IIIS')
    assert shifted_stage4_changes(model, (96, 256)) == 0 and shifted_stage4_changes(model, (128, 160)) > 0.05


@pytest.mark.slow
def test_export_onnx_range_across_swins_small_map_rule(onnx_stack, tmp_path):
    """``export_onnx`` (and so ``tools/deployment/export_onnx.py``) exports a dynamic range across the rule, from an
    example on the shifted side (stage 4: 4x5), and the file gives eager's numbers on both sides."""
    model = mixer_backbone('IIIS')
    export_onnx(model, torch.randn(1, 3, 128, 160), tmp_path / 'model.onnx', 'dynamo', dynamic=((64, 96), (256, 256)))
    errors = onnx_errors(model, tmp_path / 'model.onnx', SMALL_MAP_RULE_SIZES)
    assert max(max(e) for e in errors) < TOL, errors


def test_torchscript_exporter_refuses_dynamic_sizes(onnx_stack, tmp_path):
    model, x = mixer_backbone('IIIS'), torch.randn(1, 3, *SIZE)
    with pytest.raises(ValueError, match='one fixed size'):
        export_onnx(model, x, tmp_path / 'model.onnx', 'torchscript', dynamic=DYNAMIC)
    with pytest.raises(Exception, match='kernel of unknown shape'):     # torch's own refusal, direct call
        torch.onnx.export(model, (x,), tmp_path / 'model.onnx', dynamo=False,
                          input_names=['x'], dynamic_axes={'x': {2: 'height', 3: 'width'}})


@pytest.mark.slow
def test_export_tool_end_to_end(onnx_stack, tmp_path):
    """tools/deployment/export_onnx.py on the small (padding-aware) Mask R-CNN config, as docs/deployment.md runs it:
    turns padding-aware mode off with a notice (extract_feat has one input), exports backbone + neck with dynamic sizes
    and prints the errors at both sizes and both latencies; a bad --shape gets a one-line error, no traceback."""
    import re
    import subprocess

    config = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-mini_fpn_shapes.py')
    command = [sys.executable, osp.join(ROOT, 'tools', 'deployment', 'export_onnx.py'), config, '--shape', '64', '96',
               '--dynamic', '64', '96', '96', '128', '--repeats', '1', '--out', str(tmp_path / 'det.onnx')]
    env = {**os.environ, 'PYTHONWARNINGS': 'ignore'}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert 'note: padding-aware mode turned off for the export' in done.stdout
    errors = re.findall(r'(\d+)x(\d+): max relative error ([\d.e+-]+) over 5 outputs', done.stdout)
    assert [hw for *hw, _ in errors] == [['64', '96'], ['96', '128']], done.stdout
    assert all(float(e) < TOL for *_, e in errors), done.stdout
    assert re.search(r'onnxruntime [\d.]+ ms, eager [\d.]+ ms', done.stdout), done.stdout
    assert (tmp_path / 'det.onnx').is_file()
    small = subprocess.run(command[:3] + ['--shape', '16', '16'], capture_output=True, text=True, timeout=600, env=env)
    assert small.returncode == 2 and 'Traceback' not in small.stderr
    assert 'error: --shape 16 16: input of 16x16 pixels is too small' in small.stderr.splitlines()[-1]


def identity_onnx(path):
    """A one-node ONNX file, ``y = x`` for a float ``x`` of shape (1,)."""
    onnx = require('onnx')
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'identity',
                              [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 20)]), str(path))
    return path


@pytest.fixture
def export_tool():
    return load_tool('tools/deployment/export_onnx.py')


def test_the_tool_builds_a_fixed_size_timm_model_for_the_shape(export_tool):
    """timm's fixed-size models (InLine-DeiT, as timm's ViT) are built for ``--shape``, and with ``--dynamic`` take
    the other sizes too (``dynamic_img_size``); the pyramid classifiers are built as they are (any size)."""
    deit, _ = export_tool.build_model('inline_deit_tiny', shape=(96, 128))
    assert deit.patch_embed.img_size == (96, 128) and deit(torch.zeros(1, 3, 96, 128)).shape == (1, 1000)
    with pytest.raises(ValueError, match='dynamic_img_size=True'):
        deit(torch.zeros(1, 3, 128, 128))
    deit, _ = export_tool.build_model('inline_deit_tiny', shape=(96, 128), dynamic=True)
    assert deit(torch.zeros(1, 3, 160, 192)).shape == (1, 1000)
    swin, _ = export_tool.build_model('inline_swin_tiny', shape=(96, 128), dynamic=True)
    assert swin.pretrained_cfg['input_size'] == (3, 224, 224)


def test_timing_session_does_not_spin(onnx_stack, tmp_path):
    """``spinning=False``: onnxruntime's intra- and inter-op threads block when idle (both keys '0'), with the
    thread count asked for; a default session spins."""
    path = identity_onnx(tmp_path / 'identity.onnx')
    quiet = onnxruntime_session(path, threads=2, spinning=False)
    options = quiet.get_session_options()
    assert [options.get_session_config_entry(key) for key in ('session.intra_op.allow_spinning',
                                                              'session.inter_op.allow_spinning')] == ['0', '0']
    assert options.intra_op_num_threads == 2 and not session_spins(quiet)
    assert session_spins(onnxruntime_session(path, threads=2))


def test_export_tool_times_interleaved_rounds_without_spinning(onnx_stack, export_tool, tmp_path):
    """The tool's timing: one untimed warm-up round, then rounds of one onnxruntime run followed by one eager
    forward, each runtime's median over the timed rounds (a stand-in clock advanced by each run); it refuses a
    session that spins or that does not use torch's thread count."""
    path = identity_onnx(tmp_path / 'identity.onnx')
    now, calls = [0.], []
    durations = {'onnxruntime': iter([100., 3., 1., 2.]), 'eager': iter([50., 30., 10., 20.])}   # warm-up first

    def ran(name):
        calls.append(name)
        now[0] += next(durations[name])

    class Recorded:
        """The no-spinning session, its runs recorded."""
        def __init__(self, session):
            self.session = session

        def __getattr__(self, name):
            return getattr(self.session, name)

        def run(self, *args):
            ran('onnxruntime')
            return self.session.run(*args)

    session = Recorded(onnxruntime_session(path, threads=torch.get_num_threads(), spinning=False))
    medians = export_tool.median_latencies(lambda x: ran('eager'), session, torch.zeros(1), repeats=3,
                                           clock=lambda: now[0])
    assert calls == ['onnxruntime', 'eager'] * 4
    assert medians == {'onnxruntime': 2., 'eager': 20.}
    for spinning, threads in [(True, torch.get_num_threads()), (False, None)]:
        with pytest.raises(ValueError, match='a session whose idle threads do not spin and that uses torch'):
            export_tool.median_latencies(lambda x: x, onnxruntime_session(path, threads, spinning), torch.zeros(1), 1)


def test_export_tool_checks_its_inputs_before_building(export_tool, tmp_path):
    """A mistyped config and a checkpoint cut off part-way end the tool in one line before any model is built."""
    config = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-mini_fpn_shape.py')
    with pytest.raises(SystemExit) as exit_:
        export_tool.main([config])
    assert exit_.value.code == (f"[export_onnx] error: config not found: '{config}' (did you mean "
                                f"'{config[:-3]}s.py'?)")
    torch.save({'state_dict': {'w': torch.randn(64, 64)}}, tmp_path / 'model.pth')
    data = (tmp_path / 'model.pth').read_bytes()
    (tmp_path / 'model.pth').write_bytes(data[:len(data) // 2])
    with pytest.raises(SystemExit) as exit_:
        export_tool.main(['inline_swin_tiny', '--checkpoint', str(tmp_path / 'model.pth')])
    assert str(exit_.value.code).startswith(f"[export_onnx] error: checkpoint '{tmp_path}/model.pth' is cut off")


# Every family and every token mixer, each on a small random model that runs only the stages its mixers need
# (``out_indices``): ``build``, the example size, the dynamic range and the sizes checked besides the example. At the
# other sizes the windows and stripes take other counts and paddings, and the shifted blocks fall on the other side of
# Swin's small-map rule (a shift of ``ws // 2`` only where ``min(h, w) > ws``).
class ExportCase(NamedTuple):
    build: Callable[[], torch.nn.Module]
    example: tuple[int, int]
    dynamic: tuple[tuple[int, int], tuple[int, int]]
    sizes: list[tuple[int, int]]


def random_model(cls, **kwargs):
    torch.manual_seed(0)
    return randomized(cls(drop_path_rate=0., **kwargs))


# Stage maps of the small backbones (stride 4 first) at 96x128, the example: 24x32; at the other sizes 16x24 (64x96),
# 40x48 (160x192) and 48x16 (192x64, larger than the windows on one side only).
SIZES = dict(example=(96, 128), dynamic=((64, 64), (192, 192)), sizes=[(64, 96), (160, 192), (192, 64)])
EXPORT_CASES = {
    # Global InLine in stages 1-3, Swin's softmax in windows of 3 in stage 4 on both sides of the small-map rule
    # (SMALL_MAP_RULE_SIZES; the example's 3x4 map is not shifted).
    'swin': ExportCase(lambda: mixer_backbone('IIIS'), example=(96, 128), dynamic=((64, 64), (256, 256)),
                       sizes=SMALL_MAP_RULE_SIZES),
    # FLatten in windows of 20, shifted in the second block (at 24x32 and 40x48, not at 16x24 and 48x16), padded to
    # whole windows; then plain linear attention.
    'swin-flatten-linear': ExportCase(lambda: random_model(
        InLineSwinTransformer, arch=dict(embed_dims=16, depths=[2, 1, 1, 1], num_heads=[1, 2, 4, 8]),
        attn_type='FLSS', flatten_window_size=20, out_indices=(0, 1)), **SIZES),
    # Global FLatten: its 20x20 positional encoding resized to the map (bicubic) in the graph.
    'swin-flatten-global': ExportCase(lambda: random_model(
        InLineSwinTransformer, arch=dict(embed_dims=16, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8]),
        attn_type='FSSS', flatten_global=True, flatten_window_size=20, out_indices=(0,)), **SIZES),
    # InLine-PVT's global InLine, then PVT's spatial-reduction softmax (keys reduced 3x, sides 16, 32, 40 no multiple
    # of 3), the position embedding resized from its 56x56 grid.
    'pvt': ExportCase(lambda: random_model(
        InLinePVT, arch=dict(embed_dims=[16, 32, 48, 64], depths=[2, 1, 1, 1], num_heads=[1, 2, 3, 4],
                             sr_ratios=[3, 2, 2, 1]), attn_type='MSSS1', out_indices=(0,)), **SIZES),
    # InLine-CSwin (global InLine with LePE, stripes of 1, 2 and 7 padded to whole stripes, the last stage one window):
    # the range keeps stage 3's stripe counts above 1 (torch.export fixes a count of 1 at the example's) and crosses its
    # padding (its maps 14x18, 18x22, 16x20: 0 to 6 cells padded).
    'cswin': ExportCase(lambda: random_model(
        InLineCSwinTransformer, arch=dict(embed_dims=8, depths=[1, 2, 1, 1], num_heads=[1, 2, 2, 4]),
        attn_type='IISS'), example=(224, 288), dynamic=((224, 288), (288, 352)), sizes=[(288, 352), (256, 320)]),
    # InLine-DeiT (timm classifier, logits): InLine over the class token and the map, the position embedding of its
    # 4x4 grid resampled to the map (6x8 at the example).
    'deit': ExportCase(lambda: random_model(
        InLineDeiTClassifier, arch=dict(embed_dims=16, depths=[1], num_heads=[2], img_size=64), attn_type='I',
        dynamic_img_size=True, num_classes=10), **SIZES),
}


@pytest.mark.slow
@pytest.mark.mutation
@pytest.mark.parametrize('case', EXPORT_CASES)
def test_every_family_and_mixer_exports_with_dynamic_sizes(case, onnx_stack, tmp_path):
    """``torch.onnx.export`` called directly (no check of the range's corners as ``export_onnx`` adds), the default
    exporter, H and W symbolic multiples of 32: one file gives eager's numbers at the example and at the other sizes
    (FLatten's windows once failed to export: the roll's ``mod`` by a symbolic canvas side)."""
    build, example, dynamic, sizes = EXPORT_CASES[case]
    model = build()
    torch.onnx.export(model, (torch.randn(1, 3, *example),), tmp_path / 'model.onnx', dynamo=True,
                      dynamic_shapes=size_dims(*dynamic), external_data=False)
    errors = onnx_errors(model, tmp_path / 'model.onnx', [example, *sizes])
    assert max(max(e) for e in errors) < TOL, errors


# The TorchScript exporter's one size: the example's, except for the two families whose absolute position embedding is
# resized there, which torch refuses (InLine-PVT: InLine's per-image 3x3 kernels lose their static shape after the
# resize; InLine-DeiT: antialiased bicubic resampling has no TorchScript translation): they export at the embedding's
# own size.
TORCHSCRIPT_ONLY_AT = {'pvt': ((224, 224), 'convolution for kernel of unknown shape'),
                       'deit': ((64, 64), 'aten::_upsample_bicubic2d_aa')}


@pytest.mark.parametrize('case', EXPORT_CASES)
def test_every_family_and_mixer_exports_through_torchscript_at_a_fixed_size(case, onnx_stack, tmp_path):
    """The TorchScript exporter at one size gives eager's numbers; where torch refuses a family at the example's size,
    the refusal is checked too (docs/deployment.md names both)."""
    build, example, _, _ = EXPORT_CASES[case]
    model, path = build(), tmp_path / 'model.onnx'
    size = example
    if case in TORCHSCRIPT_ONLY_AT:
        size, refusal = TORCHSCRIPT_ONLY_AT[case]
        with pytest.raises(Exception, match=refusal):
            export_onnx(model, torch.randn(1, 3, *example), path, 'torchscript')
    export_onnx(model, torch.randn(1, 3, *size), path, 'torchscript')
    assert max(onnx_errors(model, path, [size])[0]) < TOL


@pytest.mark.parametrize('hw', [(16, 24), (24, 32), (40, 48), (48, 16), (20, 20)])
@pytest.mark.parametrize('clip', [False, True], ids=['flatten', 'inline'])
def test_graph_form_of_the_window_plan_equals_eager(hw, clip, monkeypatch):
    """Under export the plain window partition of a shifted block takes its shift from a tensor op on the map's sizes
    (``masks.graph_shift``) and rolls by ``mod`` of tensors: the same windows as eager's Python choice, on maps smaller
    than, equal to and larger than the window (20), on one side or both."""
    from inline_backbones.models.tokens import masks

    eager = masks.window_plan(hw, 2, 20, True, clip=clip)
    monkeypatch.setattr(masks, 'exporting', lambda: True)
    graph = masks.window_plan(hw, 2, 20, True, clip=clip)
    assert graph.window_hw == eager.window_hw and graph.mask is eager.mask is None
    assert torch.equal(graph.gather, eager.gather) and torch.equal(graph.scatter, eager.scatter)
