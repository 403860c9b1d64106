"""InLine backbones in Hugging Face transformers' dense-prediction models, built by name after ``import
inline_backbones`` (``TimmBackboneConfig(backbone=NAME, out_indices=...)``, transformers' own route for timm models):
UperNet, Mask2Former and Deformable DETR with every family that has dense configs (DETR, Conditional DETR and RT-DETR
with InLine-Swin), a forward at an odd size, a training step that moves every backbone weight, ``save_pretrained`` /
``from_pretrained`` to the same outputs, transformers' ``Trainer``, and the released weights
(:mod:`inline_backbones.hf`) loaded strictly, giving the maps of our mmdet/mmseg backbone."""
import pytest

transformers = pytest.importorskip(
    'transformers', reason='transformers is not installed: pip install -r requirements-test.txt (it pins the version '
                           'these tests verify)')

import json  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import timm  # noqa: E402
import torch  # noqa: E402
from cswin_fixtures import CSWIN_DIR  # noqa: E402
from flatten_fixtures import FLATTEN_DIR  # noqa: E402
from helpers import split_fences  # noqa: E402
from pvt_fixtures import PVT_DIR  # noqa: E402
from released_fixtures import FIXTURE_DIR, require  # noqa: E402
from timm.layers import DropPath  # noqa: E402
from transformers import (  # noqa: E402
    ConditionalDetrConfig,
    ConditionalDetrForObjectDetection,
    DeformableDetrConfig,
    DeformableDetrForObjectDetection,
    DetrConfig,
    DetrForObjectDetection,
    Mask2FormerConfig,
    Mask2FormerForUniversalSegmentation,
    RTDetrConfig,
    RTDetrForObjectDetection,
    TimmBackboneConfig,
    UperNetConfig,
    UperNetForSemanticSegmentation,
)

from inline_backbones import InLineCSwinTransformer, InLinePVT, InLineSwinTransformer  # noqa: E402
from inline_backbones.checkpoints.loading import CheckpointMismatchError  # noqa: E402
from inline_backbones.checkpoints.released import arch_checkpoints  # noqa: E402
from inline_backbones.hf import inline_backbones_in, load_released_backbone, set_drop_path_rate, weights  # noqa: E402
from inline_backbones.models.errors import ModelArgumentError  # noqa: E402

# timm name -> (our mmdet/mmseg backbone, its arch, the fixture folder with the released tiny file's keys and shapes)
FAMILIES = {
    'inline_swin_tiny': (InLineSwinTransformer, 'tiny', FIXTURE_DIR),
    'inline_pvt_tiny': (InLinePVT, 'tiny', PVT_DIR),
    'inline_cswin_tiny': (InLineCSwinTransformer, 'tiny', CSWIN_DIR),
    'flatten_swin_tiny': (InLineSwinTransformer, 'flatten-tiny', FLATTEN_DIR),
}
NUM_LABELS = 3
ODD_SIZE = (333, 517)


def backbone_config(name, out_indices):
    return TimmBackboneConfig(backbone=name, out_indices=list(out_indices))


# task -> (model class, config of a small head on ``name``'s stages); the heads are shrunk, the backbones are the
# released presets.
TASKS = {
    'upernet': lambda name: UperNetForSemanticSegmentation(UperNetConfig(
        backbone_config=backbone_config(name, (0, 1, 2, 3)), num_labels=NUM_LABELS, hidden_size=64,
        auxiliary_channels=32)),
    'mask2former': lambda name: Mask2FormerForUniversalSegmentation(Mask2FormerConfig(
        backbone_config=backbone_config(name, (0, 1, 2, 3)), num_labels=NUM_LABELS, num_queries=8, feature_size=64,
        mask_feature_size=64, hidden_dim=64, encoder_feedforward_dim=128, dim_feedforward=128, encoder_layers=1,
        decoder_layers=2)),
    'deformable_detr': lambda name: DeformableDetrForObjectDetection(DeformableDetrConfig(
        backbone_config=backbone_config(name, (1, 2, 3)), num_labels=NUM_LABELS, d_model=64, encoder_layers=1,
        decoder_layers=2, encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=8)),   # 1 layer: tying fails
    'detr': lambda name: DetrForObjectDetection(DetrConfig(
        backbone_config=backbone_config(name, (3,)), num_labels=NUM_LABELS, d_model=64, encoder_layers=1,
        decoder_layers=1, encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=8)),
    'conditional_detr': lambda name: ConditionalDetrForObjectDetection(ConditionalDetrConfig(
        backbone_config=backbone_config(name, (3,)), num_labels=NUM_LABELS, d_model=64, encoder_layers=1,
        decoder_layers=1, encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=8)),
    'rt_detr': lambda name: RTDetrForObjectDetection(RTDetrConfig(
        backbone_config=backbone_config(name, (1, 2, 3)), num_labels=NUM_LABELS, d_model=64, encoder_hidden_dim=64,
        encoder_ffn_dim=128, decoder_in_channels=[64, 64, 64], decoder_layers=2, decoder_ffn_dim=128,
        num_queries=8)),
}
CASES = [(name, task) for task in ('upernet', 'mask2former', 'deformable_detr') for name in FAMILIES] + [
    ('inline_swin_tiny', task) for task in ('detr', 'conditional_detr', 'rt_detr')]


def training_targets(task, batch, height, width):
    """Labels of ``batch`` images of ``height`` x ``width`` in the form each model's loss takes."""
    g = torch.Generator().manual_seed(1)
    if task == 'upernet':
        return dict(labels=torch.randint(0, NUM_LABELS, (batch, height, width), generator=g))
    if task == 'mask2former':
        return dict(mask_labels=[(torch.rand(2, height, width, generator=g) > 0.5).float() for _ in range(batch)],
                    class_labels=[torch.tensor([0, 2]) for _ in range(batch)])
    boxes = torch.tensor([[0.5, 0.5, 0.4, 0.3], [0.3, 0.6, 0.2, 0.2]])      # (cx, cy, w, h), normalised
    return dict(labels=[dict(class_labels=torch.tensor([1, 2]), boxes=boxes) for _ in range(batch)])


def check_outputs(task, out, height, width):
    """The outputs a model of ``task`` gives for one image of ``height`` x ``width``: shapes and finite values."""
    if task == 'upernet':
        assert out.logits.shape == (1, NUM_LABELS, height, width)
        values = [out.logits]
    elif task == 'mask2former':
        assert out.masks_queries_logits.shape[:2] == (1, 8)
        assert abs(out.masks_queries_logits.shape[2] - height / 4) <= 1     # the stride-4 map of the pixel decoder
        assert abs(out.masks_queries_logits.shape[3] - width / 4) <= 1
        values = [out.masks_queries_logits, out.class_queries_logits]
    else:
        assert out.pred_boxes.shape == (1, 8, 4) and out.logits.shape[:2] == (1, 8)
        assert ((out.pred_boxes >= 0) & (out.pred_boxes <= 1)).all()
        values = [out.pred_boxes, out.logits]
    assert all(torch.isfinite(v).all() for v in values)
    return values


# The round trip's contract: the weights come back bit for bit; the outputs agree within float32 rounding, not bit for
# bit. safetensors hands back tensors at addresses not aligned to 64 bytes, and some CPUs' kernels (AVX2-only EPYC:
# up to 4e-6) round differently on unaligned data than on the original model's aligned storage.
OUTPUT_TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def assert_same_weights(reloaded, model):
    """Every parameter and buffer of ``reloaded`` equal to ``model``'s, bit for bit, under the same names."""
    mine, theirs = model.state_dict(), reloaded.state_dict()
    assert mine.keys() == theirs.keys()
    differ = [k for k, v in mine.items() if not torch.equal(v, theirs[k])]
    assert not differ, f'weights changed by the round trip: {differ}'


def the_backbone(model):
    """The one InLine backbone of ``model`` (our timm classifier inside transformers' wrappers)."""
    backbones = inline_backbones_in(model)
    assert len(backbones) == 1, backbones
    return next(iter(backbones.values()))


@pytest.mark.slow
@pytest.mark.parametrize('name, task', CASES)
def test_builds_by_name_trains_and_reloads(name, task, tmp_path):
    torch.manual_seed(0)
    model = TASKS[task](name)
    backbone = the_backbone(model)
    assert backbone.pretrained_cfg['architecture'] == name

    # RT-DETR's hybrid encoder concatenates maps of strides 8-32 (with any backbone): sizes multiple of 32.
    height, width = (320, 512) if task == 'rt_detr' else ODD_SIZE
    x = torch.randn(1, 3, height, width)
    with torch.no_grad():
        check_outputs(task, model.eval()(pixel_values=x), height, width)

    model.train()
    for module in backbone.modules():
        if isinstance(module, DropPath):    # stochastic depth (the classifier's 0.1) may skip a branch's weights
            module.drop_prob = 0.
    before = {k: p.detach().clone() for k, p in backbone.named_parameters()}
    assert all(p.requires_grad for p in backbone.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = model(pixel_values=torch.randn(2, 3, 64, 96), **training_targets(task, 2, 64, 96)).loss
    assert torch.isfinite(loss)
    loss.backward()
    optimizer.step()
    still = [k for k, p in backbone.named_parameters() if torch.equal(p, before[k])]
    assert not still, f'backbone weights the training step left unchanged: {still}'

    model.save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path).eval()
    assert_same_weights(reloaded, model)
    model.eval()
    with torch.no_grad():
        for a, b in zip(check_outputs(task, model(pixel_values=x), height, width),
                        check_outputs(task, reloaded(pixel_values=x), height, width), strict=True):
            torch.testing.assert_close(a, b, **OUTPUT_TOLERANCE)


def released_format_file(name, path):
    """A file in the authors' released format (``{'model': state dict}``, their keys and shapes of the tiny model,
    buffers included) with random values."""
    shapes = json.loads(require(FAMILIES[name][2] / 'released_state_dict_shapes.json').read_text())['tiny']
    g = torch.Generator().manual_seed(0)
    state_dict = {k: torch.randn(shape, generator=g) * 0.02 for k, shape in shapes['state_dict'].items()}
    torch.save({'model': state_dict}, path)
    return str(path)


@pytest.mark.parametrize('name', FAMILIES)
def test_released_weights_give_the_maps_of_our_mmdet_mmseg_backbone(name, tmp_path):
    """The released file loads strictly into the backbone of transformers' UperNet; its maps equal those of our
    mmdet/mmseg backbone loaded from the same file. transformers' timm backbones return the stages' maps as timm's
    ``features_only`` gives them, before the per-stage output LayerNorms that mmdet/mmseg's Swin-style backbones add
    (``norm{i}``, new at fine-tuning): those are applied to transformers' maps before comparing."""
    file = released_format_file(name, tmp_path / 'released.pth')
    model = TASKS['upernet'](name).eval()
    assert load_released_backbone(model, file) == {'backbone._backbone.model': file}
    cls, arch, _ = FAMILIES[name]
    ours = cls(arch=arch, drop_path_rate=0., init_cfg=dict(type='Pretrained', checkpoint=file))
    ours.init_weights()
    ours.eval()
    x = torch.randn(1, 3, *ODD_SIZE)
    with torch.no_grad():
        maps = model.backbone(x).feature_maps
        expected = ours(x)
        assert len(maps) == len(expected) == 4
        for i, (m, e) in enumerate(zip(maps, expected, strict=True)):
            norm = getattr(ours, f'norm{i}', None)
            if norm is not None:
                m = norm(m.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            torch.testing.assert_close(m, e, rtol=1e-5, atol=1e-5)


def test_released_weights_into_a_detector_and_its_reload(tmp_path):
    """Deformable DETR keeps timm's model without transformers' backbone wrapper: the weights still reach it, and a
    saved detector reloads them."""
    file = released_format_file('inline_swin_tiny', tmp_path / 'released.pth')
    model = TASKS['deformable_detr']('inline_swin_tiny')
    assert list(load_released_backbone(model, file)) == ['model.backbone.model.model']
    weights = the_backbone(model).state_dict()
    released = torch.load(file, weights_only=True)['model']
    assert torch.equal(weights['layers.2.blocks.3.attn.qkv.weight'], released['layers.2.blocks.3.attn.qkv.weight'])
    model.save_pretrained(tmp_path / 'saved')
    reloaded = the_backbone(DeformableDetrForObjectDetection.from_pretrained(tmp_path / 'saved')).state_dict()
    assert all(torch.equal(v, reloaded[k]) for k, v in weights.items())


def test_released_weights_default_to_the_released_link(monkeypatch):
    seen = []
    monkeypatch.setattr(weights, 'load_pretrained', lambda model, file: seen.append((type(model).__name__, file)))
    model = TASKS['upernet']('inline_pvt_tiny')
    assert load_released_backbone(model) == {'backbone._backbone.model': arch_checkpoints('inline_pvt_')['tiny']}
    assert seen == [('InLinePVTClassifier', arch_checkpoints('inline_pvt_')['tiny'])]


def test_a_file_of_another_family_is_refused_with_its_keys(tmp_path):
    file = released_format_file('inline_pvt_tiny', tmp_path / 'pvt.pth')
    model = TASKS['upernet']('inline_swin_tiny')
    before = the_backbone(model).state_dict()
    with pytest.raises(CheckpointMismatchError, match=r'unexpected in checkpoint .*pos_embed1'):
        load_released_backbone(model, file)
    assert all(torch.equal(v, the_backbone(model).state_dict()[k]) for k, v in before.items())


def test_a_standalone_backbone_loads_through_transformers_own_call(tmp_path):
    """``TimmBackbone.from_pretrained(NAME, pretrained_cfg_overlay=dict(file=...))``: transformers hands timm the
    file, timm our loader (strict: another family's file is refused with its keys)."""
    from transformers import TimmBackbone

    file = released_format_file('inline_swin_tiny', tmp_path / 'swin.pth')
    backbone = TimmBackbone.from_pretrained('inline_swin_tiny', out_indices=[0, 1, 2, 3],
                                            pretrained_cfg_overlay=dict(file=file))
    assert backbone.channels == [96, 192, 384, 768]
    released = torch.load(file, weights_only=True)['model']
    assert torch.equal(the_backbone(backbone).state_dict()['layers.1.blocks.1.mlp.fc2.weight'],
                       released['layers.1.blocks.1.mlp.fc2.weight'])
    with pytest.raises(CheckpointMismatchError, match=r'unexpected in checkpoint .*pos_embed1'):
        TimmBackbone.from_pretrained('inline_swin_tiny', out_indices=[0, 1, 2, 3], pretrained_cfg_overlay=dict(
            file=released_format_file('inline_pvt_tiny', tmp_path / 'pvt.pth')))


def test_a_model_without_an_inline_backbone_is_refused():
    with pytest.raises(ModelArgumentError, match=r"holds no InLine backbone.*TimmBackboneConfig.*inline_swin_tiny"):
        load_released_backbone(torch.nn.Linear(2, 2))


@pytest.mark.slow
def test_trainer_trains_saves_and_the_saved_model_reloads(tmp_path, monkeypatch):
    """transformers' Trainer (two steps), ``save_model``, ``from_pretrained``: the same logits."""
    from transformers import Trainer, TrainingArguments

    # mmdet's and mmseg's train tools, which other tests run in this process, set LOCAL_RANK: accelerate would then
    # start a distributed run
    for name in ('LOCAL_RANK', 'RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE'):
        monkeypatch.delenv(name, raising=False)
    torch.manual_seed(0)
    model = TASKS['upernet']('inline_swin_tiny')
    before = {k: p.detach().clone() for k, p in the_backbone(model).named_parameters()}

    class Shapes(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return dict(pixel_values=torch.randn(3, 64, 96, generator=g),
                        labels=torch.randint(0, NUM_LABELS, (64, 96), generator=g))

    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=2, learning_rate=1e-4,
                             report_to=[], save_strategy='no', logging_steps=1, use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=Shapes())
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    assert all(not torch.equal(p, before[k]) for k, p in the_backbone(model).named_parameters())
    trainer.save_model(str(tmp_path / 'final'))
    reloaded = UperNetForSemanticSegmentation.from_pretrained(tmp_path / 'final').eval()
    assert_same_weights(reloaded, model)
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(pixel_values=x).logits, reloaded(pixel_values=x).logits,
                                   **OUTPUT_TOLERANCE)


@pytest.mark.slow
def test_the_docs_page_runs_as_written(tmp_path, monkeypatch):
    """docs/transformers.md's Python blocks, in order, in one namespace; the released links are served from files
    in the authors' format (random values), everything else runs as written."""

    links = {url: prefix + arch for prefix in ('inline_swin_', 'inline_pvt_', 'inline_cswin_')
             for arch, url in arch_checkpoints(prefix).items()}
    real = weights.load_pretrained
    served = []

    def load_served(model, file):
        served.append(links[file])
        real(model, released_format_file(links[file], tmp_path / f'{links[file]}.pth'))

    monkeypatch.setattr(weights, 'load_pretrained', load_served)
    page = (Path(__file__).resolve().parents[1] / 'docs' / 'transformers.md').read_text()
    blocks, last = [], None
    for number, line, lang, _ in split_fences(page):
        if lang == 'python':
            if last != number - 1:
                blocks.append([])
            blocks[-1].append(line)
            last = number
    assert len(blocks) == 4
    namespace = {}
    for block in blocks:     # a block inside a list item is indented with it
        exec(compile(textwrap.dedent('\n'.join(block)), 'docs/transformers.md', 'exec'), namespace)
    assert served == ['inline_swin_tiny', 'inline_pvt_tiny', 'inline_cswin_tiny']
    assert [b.drop_path.drop_prob for b in the_backbone(namespace['model']).layers[-1].blocks] == pytest.approx([
        0.3 * 10 / 11, 0.3])       # the last stage's blocks: 10th and 11th of 0..11 (InLine-Swin-T: 2-2-6-2)


def test_drop_path_rate_of_a_recipe_is_in_effect_in_a_training_step():
    """``TimmBackboneConfig`` cannot carry ``drop_path_rate``: :func:`set_drop_path_rate` sets the recipe's 0.3 on the
    built model as ``timm.create_model(..., drop_path_rate=0.3)`` would (each block's rate equal), and a training
    step drops whole samples' branches at that rate (the last block, rate 0.3: 96 branch outputs, each zero for a
    dropped sample); rate 0 drops none and leaves the blocks plain."""
    torch.manual_seed(0)
    config = UperNetConfig(backbone_config=backbone_config('inline_pvt_tiny', (0, 1, 2, 3)), hidden_size=32,
                           use_auxiliary_head=False, num_labels=2)
    model = UperNetForSemanticSegmentation(config)
    backbone = the_backbone(model)
    with pytest.raises(ModelArgumentError, match=r'drop_path_rate must be in \[0, 1\), got 1.5'):
        set_drop_path_rate(model, 1.5)
    [(path, rates)] = set_drop_path_rate(model, 0.3).items()
    built = timm.create_model('inline_pvt_tiny', drop_path_rate=0.3)
    blocks = [b for stage in backbone.layers for b in stage.blocks]
    assert [b.drop_path.drop_prob if isinstance(b.drop_path, DropPath) else 0. for b in blocks] == pytest.approx(
        [b.drop_path.drop_prob if isinstance(b.drop_path, DropPath) else 0.
         for stage in built.layers for b in stage.blocks]) == rates
    assert rates[0] == 0 and rates[-1] == pytest.approx(0.3) and backbone.drop_path_rate == 0.3

    zeroed = []
    hook = blocks[-1].drop_path.register_forward_hook(
        lambda module, args, out: zeroed.extend((out.flatten(1) == 0).all(1).tolist()))
    model.train()
    out = model(pixel_values=torch.randn(48, 3, 32, 32), labels=torch.randint(0, 2, (48, 32, 32)))
    out.loss.backward()
    assert len(zeroed) == 96 and 0.15 <= sum(zeroed) / 96 <= 0.45, sum(zeroed)   # about 0.3 of 96 branches
    zeroed.clear()
    set_drop_path_rate(model, 0.)
    hook.remove()
    assert not any(isinstance(m, DropPath) for m in backbone.modules())
