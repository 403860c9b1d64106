"""tools/analysis_tools/eval_imagenet.py end to end on generated ImageFolders, with released-format fixture models.

Expected accuracies are computed here independently of the tool: the authors' (Swin's) evaluation
transform written with torchvision (resize 256 bicubic, centre crop 224, ImageNet mean/std), the
model's pooled features, and a nearest-centroid head fitted on them.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pvt_fixtures as pf
import pytest
import released_fixtures as rf
import timm
import torch
from PIL import Image
from torchvision import transforms

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / 'tools' / 'analysis_tools' / 'eval_imagenet.py'
COLOURS = [(200, 40, 40), (40, 180, 60), (50, 70, 210), (220, 200, 40), (160, 60, 200), (40, 190, 200)]


def load_tool():
    spec = importlib.util.spec_from_file_location('eval_imagenet', TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_image_folder(root, class_names, per_class=3, seed=0):
    """Noisy images of one colour per class, of assorted sizes (so resize and crop matter)."""
    rng = np.random.default_rng(seed)
    for c, name in enumerate(class_names):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            h, w = rng.integers(60, 140, size=2)
            img = np.clip(np.array(COLOURS[c]) + rng.normal(0, 40, size=(h, w, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(root / name / f'{i}.png')
    return root


def authors_eval_transform():
    return transforms.Compose([
        transforms.Resize(256, interpolation=transforms.InterpolationMode.BICUBIC), transforms.CenterCrop(224),
        transforms.ToTensor(), transforms.Normalize(timm.data.IMAGENET_DEFAULT_MEAN, timm.data.IMAGENET_DEFAULT_STD)])


def pooled_features(model, root, class_names):
    """(features (n, C), folder index per image) in sorted-folder order, through the authors' transform."""
    transform, feats, labels = authors_eval_transform(), [], []
    for c, name in enumerate(sorted(class_names)):
        for path in sorted((root / name).iterdir()):
            x = transform(Image.open(path).convert('RGB'))[None]
            with torch.no_grad():
                feats.append(model.forward_head(model.forward_features(x), pre_logits=True)[0])
            labels.append(c)
    return torch.stack(feats), torch.tensor(labels)


def centroid_head(feats, labels, rows):
    """Linear head whose row ``rows[c]`` scores -|f - mean_c|^2 / 2 (+ const): nearest class mean."""
    means = torch.stack([feats[labels == c].mean(0) for c in range(len(rows))])
    weight, bias = torch.zeros(max(rows) + 1, feats.shape[1]), torch.full((max(rows) + 1,), -1e4)
    weight[rows], bias[rows] = means, -0.5 * (means ** 2).sum(1)
    return weight, bias


def top_k(logits, targets, k):
    return 100 * logits.topk(k, dim=1).indices.eq(targets[:, None]).any(1).float().mean().item()


def save_released(path, state_dict):
    torch.save({'model': state_dict, 'epoch': 299, 'max_accuracy': 0.0}, path)


@pytest.mark.slow
def test_cli_end_to_end_with_a_head_of_n_classes(tmp_path):
    """A fixture trunk with a 6-class head: the tool's top-1/top-5 equal the independent computation."""
    names = ['red', 'green', 'blue', 'yellow', 'purple', 'cyan']     # sorted order differs from colour order
    data = make_image_folder(tmp_path / 'val', names)
    trunk = timm.create_model('inline_swin_tiny', pretrained=True, num_classes=0, attn_type='IIIS',
                              pretrained_cfg_overlay=dict(file=str(rf.checkpoint_path('IIIS'))),
                              **rf.mini_arch('IIIS')).eval()
    feats, labels = pooled_features(trunk, data, names)
    weight, bias = centroid_head(feats, labels, rows=list(range(6)))
    weight[[0, 1]] = weight[[1, 0]]                                   # classes 0 and 1 swapped: known errors
    bias[[0, 1]] = bias[[1, 0]]
    logits = feats @ weight.T + bias
    expected_top1, expected_top5 = top_k(logits, labels, 1), top_k(logits, labels, 5)
    assert 0 < expected_top1 < 100 and expected_top5 == 100
    save_released(tmp_path / 'ckpt.pth', {**trunk.state_dict(), 'head.weight': weight, 'head.bias': bias})

    model_args = json.dumps({**rf.mini_arch('IIIS'), 'attn_type': 'IIIS'})
    out = subprocess.run(
        [sys.executable, str(TOOL), str(data), '--model', 'inline_swin_tiny',
         '--checkpoint', str(tmp_path / 'ckpt.pth'),
         '--num-classes', '6', '--model-args', model_args, '--batch-size', '4', '--workers', '1',
         '--device', 'cpu', '--out', str(tmp_path / 'result.json')],
        capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((tmp_path / 'result.json').read_text())
    assert result == json.loads(out.stdout)
    assert result['images'] == 18 and result['label_mode'] == 'sorted-folders' and result['top5_k'] == 5
    assert result['top1'] == pytest.approx(expected_top1) and result['top5'] == pytest.approx(expected_top5)
    assert result['data_config']['crop_pct'] == 0.875 and result['data_config']['interpolation'] == 'bicubic'
    assert 'eval' in out.stderr                                       # the progress bar


def test_imagenet_synset_subset_is_scored_with_imagenet_indices(tmp_path):
    """Three synset folders of a 1000-class model are classes 0, 1 and 999, not 0, 1, 2."""
    synsets = timm.data.ImageNetInfo().label_names()
    rows = [0, 1, 999]
    names = [synsets[i] for i in rows]
    data = make_image_folder(tmp_path / 'val', names, per_class=2)
    model = timm.create_model('inline_swin_tiny', pretrained=True, attn_type='IIIS',
                              pretrained_cfg_overlay=dict(file=str(rf.checkpoint_path('IIIS'))),
                              **rf.mini_arch('IIIS')).eval()
    feats, labels = pooled_features(model, data, names)
    weight, bias = centroid_head(feats, labels, rows)
    assert top_k(feats @ weight.T + bias, torch.tensor(rows)[labels], 1) == 100
    save_released(tmp_path / 'ckpt.pth', {**model.state_dict(), 'head.weight': weight, 'head.bias': bias})

    result = load_tool().main([str(data), '--checkpoint', str(tmp_path / 'ckpt.pth'), '--workers', '0',
                               '--model-args', json.dumps({**rf.mini_arch('IIIS'), 'attn_type': 'IIIS'}),
                               '--no-progress'])
    assert result['label_mode'] == 'imagenet-synsets' and result['classes_in_data'] == 3
    assert result['top1'] == 100.0 and result['images'] == 6


def test_folders_that_fit_no_class_list_are_rejected(tmp_path):
    data = make_image_folder(tmp_path / 'val', ['a', 'b'], per_class=1)
    with pytest.raises(ValueError, match='2 class folders and the model 1000 classes'):
        load_tool().main([str(data), '--checkpoint', str(rf.checkpoint_path('IIIS')), '--workers', '0',
                          '--model-args', json.dumps({**rf.mini_arch('IIIS'), 'attn_type': 'IIIS'})])


def test_the_pvt_models_are_scored_through_their_squash_crop(tmp_path):
    """An InLine-PVT file through the squash-crop transform, with the model's own predictions as the reference."""
    tool = load_tool()
    data = make_image_folder(tmp_path / 'val', ['n01440764', 'n01443537'], per_class=2)
    result = tool.main([str(data), '--model', 'inline_pvt_tiny', '--checkpoint', str(pf.checkpoint_path('IISS')),
                        '--model-args', json.dumps(dict(attn_type='IISS', **pf.mini_arch('IISS'))),
                        '--device', 'cpu', '--workers', '0', '--no-progress'])
    assert result['images'] == 4 and result['label_mode'] == 'imagenet-synsets'
    assert result['data_config']['crop_mode'] == 'squash' and result['data_config']['crop_pct'] == 0.875
    model = pf.released_classifier('IISS')
    transform = timm.data.create_transform(**timm.data.resolve_data_config(model=model))
    dataset, _ = tool.build_dataset(str(data), transform, 1000)
    with torch.no_grad():
        hits = sum(int(model(x[None]).argmax() == y) for x, y in dataset)
    assert result['top1'] == 100 * hits / 4
