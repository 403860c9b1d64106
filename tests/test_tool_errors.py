"""What a user of the tools sees (inline_backbones/cli.py): a mistake ends a tool with one line, ``[tool] error:
<problem and fix>``, and status 1, also where mmengine's registry or mmdet's / mmseg's own tools raise it; a bug keeps
its traceback; ``--debug`` or ``INLINE_DEBUG=1`` shows every traceback; upstream warnings are not shown; long work
reports its steps on stderr."""
import json
import os
import os.path as osp
import subprocess
import sys
import urllib.error
import warnings

import cv2
import numpy as np
import pytest
import torch
from tool_modules import load_tool

from inline_backbones.cli import run_tool, user_message
from inline_backbones.data.tool_inputs import ToolInputError
from inline_backbones.models.errors import ModelArgumentError

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DET_CSWIN = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-cswin-t_fpn_ms-crop-1x_coco.py')
SEG_CSWIN = osp.join(ROOT, 'mmseg_configs', 'inline-cswin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py')
FINETUNE = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-t_fpn_finetune-custom-coco.py')
SIZE_AS_OPTION = ("InLineCSwinTransformer got unexpected keyword arguments ['embed_dims']; the InLine-CSwin options "
                  "are ['attn_drop_rate', 'drop_rate', 'mlp_ratio', 'qkv_bias']. The arch holds embed_dims: name a "
                  "preset (arch='tiny', 'small', 'base') or give a size of your own, arch=dict(embed_dims=..., "
                  'depths=[...], num_heads=[...], split_size=[...]) (no released checkpoint fits a size of your own: '
                  'init_cfg=None)')


def _child(tmp_path, base, body, name='child.py'):
    path = tmp_path / name
    path.write_text(f'_base_ = {base!r}\n{body}\n')
    return str(path)


def _image(tmp_path):
    path = str(tmp_path / 'a.png')
    assert cv2.imwrite(path, np.full((64, 64, 3), 127, np.uint8))
    return path


def _exit_line(tool, argv):
    """The line ``run_tool`` ends ``tools/<tool>.py`` with on ``argv`` (a ``SystemExit`` carrying it: status 1)."""
    module = load_tool(f'tools/{tool}.py')
    with pytest.raises(SystemExit) as exit_:
        run_tool(module.main, osp.basename(tool), list(map(str, argv)))
    return exit_.value.code


def test_a_size_given_as_an_option_ends_infer_and_train_in_one_line(tmp_path):
    """A CSwin child config with ``backbone=dict(embed_dims=97)``: the backbone's error, raised inside mmengine's
    build of the detector and the segmentor (mmseg's own train tool, through runpy), is the line, and says where
    sizes go."""
    checkpoint = tmp_path / 'model.pth'
    torch.save({'state_dict': {}}, checkpoint)
    det = _child(tmp_path, DET_CSWIN, 'model = dict(backbone=dict(embed_dims=97))')
    assert _exit_line('infer', [det, checkpoint, _image(tmp_path), '--out-dir', tmp_path / 'out',
                                '--device', 'cpu']) == f'[infer] error: {SIZE_AS_OPTION}'
    seg = _child(tmp_path, SEG_CSWIN, 'model = dict(backbone=dict(embed_dims=97))', 'seg.py')
    assert _exit_line('train', [seg, '--work-dir', tmp_path / 'work']) == f'[train] error: {SIZE_AS_OPTION}'


def test_an_empty_checkpoint_ends_infer_in_one_line(tmp_path):
    (tmp_path / 'empty.pth').write_bytes(b'')
    assert _exit_line('infer', [DET_CSWIN, tmp_path / 'empty.pth', _image(tmp_path)]) == (
        f"[infer] error: checkpoint '{tmp_path}/empty.pth' is cut off: the file is empty (0 bytes). The download or "
        'copy stopped part-way: fetch the file again')


def test_a_download_without_network_ends_in_one_line(tmp_path, monkeypatch):
    def offline(url, dest):
        raise urllib.error.URLError(OSError(101, 'Network is unreachable'))

    monkeypatch.setattr('inline_backbones.checkpoints.loading._fetch', offline)
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch'))
    url = 'https://example.invalid/inline_swin_t.pth'
    line = _exit_line('analysis_tools/analyze_attention', [_image(tmp_path), '--arch', 'tiny', '--checkpoint', url,
                                                           '--out-dir', tmp_path / 'out'])
    assert line.startswith(f"[analyze_attention] error: cannot download checkpoint '{url}': [Errno 101] Network is "
                           f"unreachable. Without network access, fetch the file elsewhere and either put it at "
                           f"'{tmp_path}/torch/hub/checkpoints/inline_swin_t-"), line
    assert '\n' not in line


def _coco(path, categories):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(
        images=[dict(id=1, file_name='a.png', width=64, height=64)],
        annotations=[dict(id=1, image_id=1, category_id=1, bbox=[4, 4, 20, 20], area=400, iscrowd=0,
                          segmentation=[[4, 4, 24, 4, 24, 24, 4, 24]])],
        categories=[dict(id=i + 1, name=name) for i, name in enumerate(categories)])))


def test_classes_that_share_no_name_with_the_base_get_the_class_check_error(tmp_path):
    """A child of the fine-tuning config that sets ``classes`` and its data paths: with none of the base's classes
    among its json's categories, mmengine fails as it builds the emptied training set, before ClassCheckHook runs;
    the tool ends with the hook's error all the same."""
    root = tmp_path / 'data'
    for split in ('train', 'val'):
        _coco(root / 'annotations' / f'instances_{split}.json', ['cat', 'dog'])
    child = _child(tmp_path, FINETUNE, f"data_root = '{root}/'\nclasses = ('cat', 'dog')\n"
                   'train_dataloader = dict(dataset=dict(data_root=data_root))\n'
                   'val_dataloader = dict(dataset=dict(data_root=data_root))\ntest_dataloader = val_dataloader\n'
                   "val_evaluator = dict(ann_file=data_root + 'annotations/instances_val.json')\n"
                   'test_evaluator = val_evaluator')
    line = _exit_line('train', [child, '--work-dir', tmp_path / 'work'])
    assert line.startswith("[train] error: the classes of this run do not agree with the config's `classes` (2): "
                           'cat, dog\n'
                           '  train dataset (CocoDataset) metainfo classes (4): disc, box, triangle, hexagon\n'
                           '      extra: disc, box, triangle, hexagon\n      missing: cat, dog\n'), line
    assert "  heads' num_classes: roi_head.bbox_head 4, roi_head.mask_head 4 (the classes are 2)\n" in line
    assert f'python tools/misc/finetune_config.py {root}/ --train-json annotations/instances_train.json' in line


def _refuse(argv):
    raise ToolInputError('image not found: x.jpg')


def test_debug_and_the_environment_variable_show_the_traceback(monkeypatch):
    seen = []
    assert run_tool(lambda argv: seen.append(argv) or 3, 'tool', ['a', '--debug', '--x', '1']) == 3
    assert seen == [['a', '--x', '1']]                       # --debug is the wrapper's, wherever it is
    with pytest.raises(SystemExit) as exit_:
        run_tool(_refuse, 'infer', [])
    assert exit_.value.code == '[infer] error: image not found: x.jpg'
    with pytest.raises(ToolInputError, match='^image not found: x.jpg$'):
        run_tool(_refuse, 'infer', ['--debug'])
    monkeypatch.setenv('INLINE_DEBUG', '1')
    with pytest.raises(ToolInputError):
        run_tool(_refuse, 'infer', [])
    monkeypatch.setenv('INLINE_DEBUG', '0')
    with pytest.raises(SystemExit):
        run_tool(_refuse, 'infer', [])


@pytest.mark.parametrize('bug', [ValueError('x'), TypeError('f() missing 1 required positional argument'),
                                 KeyError('model'), RuntimeError('shape mismatch')])
def test_a_bug_keeps_its_traceback(bug):
    def main(argv):
        raise bug

    with pytest.raises(type(bug)):
        run_tool(main, 'tool', [])


def test_which_errors_are_mistakes_and_their_lines():
    assert user_message(ModelArgumentError('bad arch')) == 'bad arch'
    missing = KeyError('InLineSwin is not in the mmdet::model registry. Please check whether the value of '
                       '`InLineSwin` is correct')                   # mmengine's, for a mistyped type
    assert user_message(missing) == missing.args[0]
    assert user_message(FileNotFoundError(2, 'No such file or directory', 'a.json')) == (
        "[Errno 2] No such file or directory: 'a.json'")
    assert user_message(KeyError('model')) is None and user_message(ValueError('x')) is None


def test_a_size_of_ones_own_that_the_heads_do_not_divide_is_a_mistake():
    """A custom arch whose width its heads do not divide (a CSwin config's ``arch=dict(embed_dims=97, ...)``) is
    refused by the mixers with the models' argument error: one line from the tools, naming where sizes go."""
    from inline_backbones import InLineCSwinTransformer

    with pytest.raises(ModelArgumentError) as error:
        InLineCSwinTransformer(arch=dict(embed_dims=97, depths=[1, 1, 1, 1], num_heads=[2, 4, 8, 16],
                                         split_size=[1, 2, 7, 7]), attn_type='IIII', init_cfg=None)
    assert user_message(error.value).startswith('embed_dims 97 is not divisible by num_heads 2: ')


def test_upstream_warnings_are_hidden_and_others_shown():
    """pkg_resources' deprecation (mmengine imports it to find mmdet) is not shown; a warning about anything else
    is."""
    from mmengine.utils import is_installed

    def main(argv):
        is_installed('mmdet')
        warnings.warn('about your input', UserWarning, stacklevel=1)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter('always')
        run_tool(main, 'tool', [])
    assert [str(w.message) for w in seen] == ['about your input']


def test_compare_attention_reports_each_image_size_and_model(tmp_path, capsys, monkeypatch):
    tool = load_tool('tools/analysis_tools/compare_attention.py')
    monkeypatch.setattr('inline_backbones.analysis.compare_plots.plot_all', lambda *args: None)   # seconds, no step
    tool.main([_image(tmp_path), '--models', 'inline', '--sizes', '64', '96', '--num-queries', '4', '--num-pairs',
               '2', '--rank-max-tokens', '16', '--out-dir', str(tmp_path / 'out')])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith('[compare_attention]')]
    assert len(lines) == 3, lines
    assert lines[0].startswith('[compare_attention] 1/2: a.png at 64x64, inline: ') and lines[0].endswith(' s')
    assert lines[1].startswith('[compare_attention] 2/2: a.png at 96x96, inline: ')
    assert lines[2] == f'[compare_attention] writing the statistics, tables and figures to {tmp_path}/out'


def test_measure_padding_reports_each_round(capsys):
    tool = load_tool('tools/analysis_tools/measure_padding.py')
    tool.main(['--latency', '--latency-image', '32x32', '--repeats', '2', '--models', 'inline-swin-t'])
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(' s')[0].rsplit(' ', 1)[0] for line in lines] == [
        '[measure_padding] round 1/2: inline-swin-t', '[measure_padding] round 2/2: inline-swin-t']


@pytest.mark.slow
def test_as_a_user_runs_it_a_mistake_is_one_line_and_debug_shows_the_traceback(tmp_path):
    """tools/infer.py in a process of its own: the config's mistake is stderr's one line (no upstream warning),
    status 1; with --debug an error shows its traceback."""
    checkpoint = tmp_path / 'model.pth'
    torch.save({'state_dict': {}}, checkpoint)
    image = _image(tmp_path)
    tool = [sys.executable, osp.join(ROOT, 'tools', 'infer.py')]
    env = {k: v for k, v in os.environ.items() if k not in ('INLINE_DEBUG', 'PYTHONWARNINGS')}
    out = subprocess.run(tool + [_child(tmp_path, DET_CSWIN, 'model = dict(backbone=dict(embed_dims=97))'),
                                 str(checkpoint), image, '--out-dir', str(tmp_path / 'out'), '--device', 'cpu'],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 1 and out.stderr == f'[infer] error: {SIZE_AS_OPTION}\n', out.stderr
    (tmp_path / 'empty.pth').write_bytes(b'')
    out = subprocess.run(tool + [DET_CSWIN, str(tmp_path / 'empty.pth'), image, '--debug'], capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 1 and out.stderr.startswith('Traceback (most recent call last):\n'), out.stderr
    assert out.stderr.endswith("inline_backbones.data.tool_inputs.ToolInputError: checkpoint "
                               f"'{tmp_path}/empty.pth' is cut off: the file is empty (0 bytes). "
                               'The download or copy stopped part-way: fetch the file again\n'), out.stderr
