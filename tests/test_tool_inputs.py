"""What the tools check before they build a model (inline_backbones/data/tool_inputs.py): paths with a suggestion for a
typo, checkpoints cut off or empty, images by content, a folder's other files skipped; one line and status 1 on exit
(inline_backbones/cli.py)."""
import os

import cv2
import numpy as np
import pytest
import torch

from inline_backbones.cli import exit_on_user_error
from inline_backbones.data.tool_inputs import ToolInputError, check_checkpoint, check_config
from inline_backbones.openmmlab.task_tools import read_config
from inline_runtime.images import RuntimeInputError, image_inputs


def _image(path, shape=(8, 10, 3)):
    assert cv2.imwrite(str(path), np.full(shape, 127, np.uint8))
    return str(path)


def test_a_mistyped_config_is_named_with_the_closest_file(tmp_path):
    (tmp_path / 'mask-rcnn_inline-swin-t_fpn_1x_coco.py').write_text('')
    with pytest.raises(ToolInputError, match=rf"^config not found: '{tmp_path}/mask-rcnn_inline-swin-t_fpn_1x_cco.py' "
                       rf"\(did you mean '{tmp_path}/mask-rcnn_inline-swin-t_fpn_1x_coco.py'\?\)$"):
        check_config(str(tmp_path / 'mask-rcnn_inline-swin-t_fpn_1x_cco.py'))
    with pytest.raises(ToolInputError, match=r"\(the folder '.*/nowhere' does not exist either\)$"):
        check_config(str(tmp_path / 'nowhere' / 'x.py'))
    assert check_config('mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py')       # scoped names: mmengine's to resolve
    assert check_config(str(tmp_path / 'mask-rcnn_inline-swin-t_fpn_1x_coco.py'))


def test_a_config_that_does_not_load_is_named_with_its_error(tmp_path):
    """A missing base, a syntax error and an undefined name, in the config or one it inherits."""
    cases = {"_base_ = './nope.py'\n": rf"FileNotFoundError: .* '{tmp_path}/./nope.py'$",
             "_base_ = 'mmdet::mask_rcnn/nope.py'\n": r'FileNotFoundError: file ".*/mask_rcnn/nope.py" does not exist$',
             'model = dict(\n': r"SyntaxError: '\(' was never closed \(line 1\)$",
             'model = dict(depth=depths)\n': r"NameError: name 'depths' is not defined$"}
    for i, (text, error) in enumerate(cases.items()):
        (tmp_path / f'{i}.py').write_text(text)
        with pytest.raises(ToolInputError, match=rf"^config '{tmp_path}/{i}.py' does not load: {error}"):
            read_config(str(tmp_path / f'{i}.py'))
    (tmp_path / 'child.py').write_text("_base_ = './2.py'\n")                 # the syntax error in its base
    with pytest.raises(ToolInputError, match=r"child.py' does not load: SyntaxError: '\(' was never closed"):
        read_config(str(tmp_path / 'child.py'))
    (tmp_path / 'good.py').write_text('a = 1\n')
    assert read_config(str(tmp_path / 'good.py')).a == 1


def test_an_upstream_config_is_read_by_its_scope_name():
    cfg = read_config('mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py')
    assert cfg.model.backbone.type == 'SwinTransformer' and cfg.default_scope == 'mmseg'
    with pytest.raises(ToolInputError, match='no such config'):
        read_config('mmseg::swin/no-such-recipe.py')


def test_checkpoints_missing_cut_off_or_empty_are_refused_before_loading(tmp_path):
    torch.save({'state_dict': {'w': torch.randn(32, 32)}}, tmp_path / 'model.pth')
    assert check_checkpoint(str(tmp_path / 'model.pth'))
    assert check_checkpoint('https://example.invalid/model.pth')             # downloaded (and checked) later
    data = (tmp_path / 'model.pth').read_bytes()
    (tmp_path / 'cut.pth').write_bytes(data[:len(data) // 2])
    with pytest.raises(ToolInputError, match=rf"^checkpoint '{tmp_path}/cut.pth' is cut off: the file has "
                       rf"{len(data) // 2:,} bytes and stops inside its entry .* fetch the file again$"):
        check_checkpoint(str(tmp_path / 'cut.pth'))
    with pytest.raises(ToolInputError, match=r"^checkpoint not found: '.*/modle.pth' \(did you mean '.*/model.pth'"):
        check_checkpoint(str(tmp_path / 'modle.pth'))
    (tmp_path / 'empty.pth').write_bytes(b'')
    with pytest.raises(ToolInputError, match=rf"^checkpoint '{tmp_path}/empty.pth' is cut off: the file is empty "
                       r'\(0 bytes\)\. .* fetch the file again$'):
        check_checkpoint(str(tmp_path / 'empty.pth'))
    (tmp_path / 'two.pth').write_bytes(data[:2])                               # inside the zip signature
    with pytest.raises(ToolInputError, match=r"is cut off: the file has 2 bytes and stops inside the signature"):
        check_checkpoint(str(tmp_path / 'two.pth'))


def test_a_folder_gives_its_images_and_skips_the_rest(tmp_path):
    """By content, not by name: a JSON file, a text file named .jpg and hidden files are not images; a PNG named
    .dat is. Sub-folders are not entered."""
    a = _image(tmp_path / 'a.jpg')
    b = _image(tmp_path / 'b.png')
    (tmp_path / 'labels.json').write_text('{}')
    (tmp_path / 'fake.jpg').write_text('not an image')
    (tmp_path / '.hidden.jpg').write_bytes((tmp_path / 'a.jpg').read_bytes())
    os.rename(_image(tmp_path / 'c.png'), tmp_path / 'c.dat')
    (tmp_path / 'sub').mkdir()
    _image(tmp_path / 'sub' / 'd.jpg')
    images, skipped = image_inputs([str(tmp_path)])
    assert images == [a, b, str(tmp_path / 'c.dat')]
    assert skipped == [str(tmp_path / 'fake.jpg'), str(tmp_path / 'labels.json')]


def test_named_files_must_exist_and_be_images(tmp_path):
    a = _image(tmp_path / 'a.jpg')
    (tmp_path / 'labels.json').write_text('{}')
    assert image_inputs([a, a]) == ([a, a], [])
    with pytest.raises(RuntimeInputError, match=rf"^image not found: '{tmp_path}/b.jpg' \(did you mean '.*/a.jpg'"):
        image_inputs([a, str(tmp_path / 'b.jpg')])
    with pytest.raises(RuntimeInputError, match=rf"^'{tmp_path}/labels.json' is not an image OpenCV can read .*: give "
                       r'image files, or a folder \(whose other files are skipped\)$'):
        image_inputs([str(tmp_path / 'labels.json')])
    os.remove(a)
    with pytest.raises(RuntimeInputError, match=rf"^no image in '{tmp_path}' \(1 other file\(s\) skipped\)$"):
        image_inputs([str(tmp_path)])


def test_an_input_error_exits_with_one_line():
    with pytest.raises(SystemExit) as exit_:
        with exit_on_user_error('infer'):
            raise ToolInputError('image not found: x.jpg')
    assert exit_.value.code == '[infer] error: image not found: x.jpg'    # printed on stderr, status 1
    with pytest.raises(KeyError):                                          # anything else is not swallowed
        with exit_on_user_error('infer'):
            raise KeyError('x')
