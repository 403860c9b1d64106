"""Graph capture of the backbone and the timm classifiers: torch.fx symbolic tracing (torchvision's feature extractor
with timm's notrace lists; timm's ``create_feature_extractor`` of every family's classifier is in the family
contract), torch.export at dynamic sizes, torch.compile with one graph for every size (plain and padding-aware),
(padding-aware export with the regions as an input: tests/test_onnx_export.py, through torch.export and
onnxruntime); and the core imports no mmcv."""
import subprocess
import sys

import pytest
import timm
import torch
from mutmut_compat import compile_on_unwrapped_code, fx_on_unwrapped_code
from padding_cases import small_backbone
from timm.layers import get_notrace_functions, get_notrace_modules

from inline_backbones.deployment.onnx_export import size_dims

TINY_TIMM = dict(depths=(1, 1, 2, 1), embed_dims=32, num_heads=(1, 2, 4, 8))


def relative(a, b):
    return float((a - b).abs().max() / b.abs().max())


def classifier(**kwargs):
    torch.manual_seed(0)
    return timm.create_model('inline_swin_tiny', **TINY_TIMM, **kwargs).eval()


@fx_on_unwrapped_code
@pytest.mark.parametrize('kwargs', [dict(), dict(padding_aware=True), dict(inline_window_size=4)])
def test_torchvision_feature_extractor_on_the_backbone(kwargs):
    """torchvision's fx feature extractor, given timm's notrace lists, returns the backbone's maps (padding-aware:
    with each image's region inferred inside the leaf that reads it)."""
    from torchvision.models.feature_extraction import create_feature_extractor

    model = small_backbone('base', **kwargs)
    tracer = dict(leaf_modules=list(get_notrace_modules()), autowrap_functions=list(get_notrace_functions()))
    graph = create_feature_extractor(model, return_nodes={'to_nchw': 'c2', 'to_nchw_3': 'c5'}, tracer_kwargs=tracer)
    x = torch.randn(2, 3, 96, 128)
    x[1, :, 70:] = 0
    x[1, :, :, 100:] = 0
    with torch.no_grad():
        out, ref = graph(x), model(x)
    torch.testing.assert_close(out['c2'], ref[0], rtol=0, atol=0)
    torch.testing.assert_close(out['c5'], ref[3], rtol=0, atol=0)


def _export(model, args, dynamic_shapes):
    return torch.export.export(model, args, dynamic_shapes=dynamic_shapes)


@pytest.mark.slow
def test_torch_export_backbone_dynamic_sizes():
    model = small_backbone('base')            # IIMS2: global InLine, InLine and softmax in one stage, softmax
    program = _export(model, (torch.randn(1, 3, 256, 288),), size_dims((256, 256), (320, 352)))
    for hw in [(256, 288), (320, 352), (288, 256)]:
        x = torch.randn(1, 3, *hw)
        with torch.no_grad():
            errors = [relative(a, b) for a, b in zip(program.module()(x), model(x), strict=True)]
        assert len(errors) == 4 and max(errors) < 1e-5, (hw, errors)


@pytest.mark.slow
def test_torch_export_classifier_and_its_features():
    model = classifier()
    # from 256 pixels up the last stage is shifted and cut into two windows per side: one graph serves the range
    program = _export(model, (torch.randn(1, 3, 256, 288),), size_dims((256, 256), (320, 352)))
    for hw in [(256, 288), (320, 352)]:
        x = torch.randn(1, 3, *hw)
        with torch.no_grad():
            assert relative(program.module()(x), model(x)) < 1e-5
    assert model.forward_features(torch.randn(1, 3, 64, 96)).shape == (1, 2, 3, 256)          # NHWC, as timm's Swin
    assert model.pretrained_cfg['pool_size'] == (7, 7)


@pytest.mark.slow
@pytest.mark.parametrize('padding_aware', [False, True])
def test_compile_fullgraph_dynamic_one_graph_for_every_size(padding_aware):
    """``torch.compile(backbone, fullgraph=True, dynamic=True)``: one graph (no graph break, no recompile) serves
    sizes on one side of Swin's small-map rule, plain and padding-aware (regions as a tensor input), and it
    computes what eager mode does. Traced with dynamo's counting backend (inductor's code generation is torch's
    to test, and takes minutes on a CPU)."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    model = small_backbone('base', padding_aware=padding_aware)   # IIMS2: every mixer, global and windowed
    counter = CompileCounter()
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=counter)
    for hw, shapes in [((256, 288), [[256, 288], [192, 256]]), ((320, 352), [[320, 300], [320, 352]]),
                       ((288, 256), [[288, 256], [288, 256]])]:
        x = torch.randn(2, 3, *hw)
        kwargs = dict(image_shapes=torch.tensor(shapes)) if padding_aware else {}
        with torch.no_grad():
            errors = [relative(a, b) for a, b in zip(compiled(x, **kwargs), model(x, **kwargs), strict=True)]
        assert max(errors) < 1e-5, (hw, errors)
    assert counter.frame_count == 1


@compile_on_unwrapped_code
def test_compiled_padding_aware_backbone_needs_the_regions_as_a_tensor():
    compiled = torch.compile(small_backbone('tiny', padding_aware=True), fullgraph=True, backend='eager')
    with pytest.raises(Exception, match=r'take each image.s \(height, width\) as a graph input'):
        compiled(torch.randn(1, 3, 64, 64), image_shapes=[(64, 64)])


@pytest.mark.slow
def test_mmengine_compile_route_trains(tmp_path):
    """``compile = dict(...)`` in a config: mmengine's Runner wraps the model's ``train_step`` in torch.compile,
    which traces the InLine backbone (dynamo's eager backend here; inductor on a GPU) and trains."""
    import torch._dynamo.utils
    from mmengine.model import BaseModel
    from mmengine.runner import Runner

    class Model(BaseModel):
        def __init__(self):
            super().__init__()
            self.backbone = small_backbone('tiny').train()
            self.head = torch.nn.Linear(self.backbone.num_features[-1], 1)

        def forward(self, inputs, labels, mode='tensor'):
            out = self.head(self.backbone(torch.stack(inputs))[-1].mean((2, 3))).squeeze(-1)
            return dict(loss=(out - torch.stack(labels)).square().mean()) if mode == 'loss' else out

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    dataset = [dict(inputs=torch.randn(3, 64, 64), labels=torch.tensor(1.0)) for _ in range(4)]
    runner = Runner(model=Model(), work_dir=str(tmp_path), cfg=dict(compile=dict(backend='eager')),   # a config's key
                    train_dataloader=dict(dataset=dataset, sampler=dict(type='DefaultSampler', shuffle=False),
                                          batch_size=2, collate_fn=dict(type='pseudo_collate')),
                    optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
                    train_cfg=dict(by_epoch=False, max_iters=2), default_hooks=dict(checkpoint=None),
                    default_scope='mmengine')
    runner.train()
    assert runner.iter == 2 and hasattr(runner.model.train_step, '_torchdynamo_orig_callable')
    assert torch._dynamo.utils.counters['stats']['unique_graphs'] > 0


@pytest.mark.slow
def test_core_imports_no_mmcv():
    """Building and running InLine-Swin-T (backbone, padding-aware) and timm's classifier loads no mmcv module."""
    code = '''
import sys, timm, torch, inline_backbones
from inline_backbones import InLineSwinTransformer
with torch.no_grad():
    InLineSwinTransformer('tiny', drop_path_rate=0.2, padding_aware=True).eval()(torch.randn(1, 3, 64, 64))
    timm.create_model('inline_swin_tiny', drop_path_rate=0.2).eval()(torch.randn(1, 3, 64, 64))
print(sorted(m for m in sys.modules if m == 'mmcv' or m.startswith('mmcv.')))
'''
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == '[]'


@pytest.mark.parametrize('trace, compiling, exporting, onnx', [
    (t, c, e, o) for t in (False, True) for c in (False, True) for e in (False, True) for o in (False, True)])
def test_graph_mode_predicates_follow_their_rules(monkeypatch, trace, compiling, exporting, onnx):
    """graph_mode.py's four predicates from what torch says is capturing (jit trace, torch.compile, torch.export,
    an ONNX exporter), over every combination (the real captures are run by the slow tests above)."""
    from inline_backbones.models.tokens import graph_mode

    monkeypatch.setattr(torch.jit, 'is_tracing', lambda: trace)
    monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: compiling)
    monkeypatch.setattr(torch.compiler, 'is_exporting', lambda: exporting)
    monkeypatch.setattr(torch.onnx, 'is_in_onnx_export', lambda: onnx)
    assert graph_mode.exporting_or_tracing() == (trace or compiling or onnx)
    assert graph_mode.exporting() == (exporting or onnx)
    assert graph_mode.regions_in_graph() == (exporting or onnx or compiling)
    assert graph_mode.may_branch_on_size() == (not (trace or exporting or onnx or compiling))

