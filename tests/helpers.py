"""What several test modules share besides the fixtures (``released_fixtures.py``, ``pvt_fixtures.py``), the padding
cases (``padding_cases.py``) and the scripts' modules (``tool_modules.py``): OpenMMLab models built from this
repository's configs, and the anchors of markdown headings. Test modules import these from here, never from one
another. mmdet and mmseg are imported by the functions that use them."""
import re
import unicodedata

import torch

FENCE = re.compile(r'^(\s*)(`{3,}|~{3,})\s*([\w+-]*)')


def build_detector(cfg):
    """The detector of an mmdet config, without released weights (none on a test machine), SyncBN as BN."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.model import revert_sync_batchnorm

    register_all_modules(init_default_scope=True)
    cfg.model.backbone.init_cfg = None
    model = revert_sync_batchnorm(MODELS.build(cfg.model))
    model.init_weights()
    return model


def build_segmentor(cfg):
    """The segmentor of an mmseg config, without released weights (none on a test machine), SyncBN as BN."""
    from mmengine.model import revert_sync_batchnorm
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS
    from mmseg.utils import register_all_modules

    register_all_modules(init_default_scope=False)
    init_default_scope('mmseg')
    cfg.model.backbone.init_cfg = None
    model = revert_sync_batchnorm(MODELS.build(cfg.model))
    model.init_weights()
    return model


def demo_batch(num_classes, shapes=((3, 128, 160), (3, 97, 131))):
    """An mmseg batch before its data preprocessor: uint8 images of ``shapes`` with random label maps of
    ``num_classes`` classes."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    inputs, samples = [], []
    for shape in shapes:
        inputs.append(torch.randint(0, 256, shape, dtype=torch.uint8))
        sample = SegDataSample(metainfo=dict(img_shape=shape[1:], ori_shape=shape[1:]))
        sample.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, *shape[1:])))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def split_fences(text):
    """(line number, line, fence language or None) for every line; fence marker lines are left out."""
    fence, lang = None, None
    for number, line in enumerate(text.split('\n'), 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence, lang = match.group(2), match.group(3).lower()
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            fence, lang = None, None
        else:
            yield number, line, (lang if fence is not None else None), fence is not None


def slug(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces -> hyphens."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)            # links keep their text
    text = text.replace('`', '').strip().lower()
    text = ''.join(c for c in text if c in ' -_' or unicodedata.category(c)[0] in 'LN')
    return text.replace(' ', '-')


def anchors(path):
    """Anchors of a markdown file's headings (duplicates numbered -1, -2, ... as GitHub does)."""
    seen, result = {}, set()
    for _, line, _, fenced in split_fences(path.read_text()):
        match = re.match(r'^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$', line)
        if match and not fenced:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f'{base}-{count}')
    return result
