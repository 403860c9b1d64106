"""What several test modules share besides the fixtures (``released_fixtures.py``, ``pvt_fixtures.py``, ...), the
padding cases (``padding_cases.py``), the reference InLine attention (``reference_attention.py``, torch only) and the
scripts' modules (``tool_modules.py``): OpenMMLab models built from this repository's configs, the options of small
training runs, and the anchors of markdown headings. Test modules import these from here, never from one another.
mmdet and mmseg are imported by the functions that use them."""
import glob
import os
import re
import unicodedata

import torch

# Swin's and PVT v1's published sizes (Liu et al. 2021, Wang et al. 2021), written out here, not read from the
# package: the InLine preset a recipe of that size must build.
SWIN_SIZES = {(96, (2, 2, 6, 2), (3, 6, 12, 24)): 'tiny', (96, (2, 2, 18, 2), (3, 6, 12, 24)): 'small',
              (128, (2, 2, 18, 2), (4, 8, 16, 32)): 'base'}
PVT_SIZES = {(2, 2, 2, 2): 'tiny', (3, 4, 6, 3): 'small', (3, 4, 18, 3): 'medium', (3, 8, 27, 3): 'large'}

# ``--cfg-options`` of a small training run: the dataloaders start no worker processes.
NO_WORKERS = {f'{split}_dataloader.{key}': value for split in ('train', 'val', 'test')
              for key, value in (('num_workers', 0), ('persistent_workers', False))}

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


def upstream_recipe_files():
    """Every Swin and PVT v1 recipe of the installed mmdet and mmseg (by file name; the tests check the type), or
    none where they are not installed."""
    import importlib.util
    files = []
    for name in ('mmdet', 'mmseg'):
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        root = os.path.join(os.path.dirname(spec.origin), '.mim', 'configs')
        files += [f for f in sorted(glob.glob(os.path.join(root, '**', '*.py'), recursive=True))
                  if '_base_' not in f and re.search(r'swin|(^|_)pvt-', os.path.basename(f), re.I)]
    return files


def recipe_id(path):
    """``mmdet::swin/x.py`` for an installed recipe's path."""
    package, _, config = path.partition(f'{os.sep}.mim{os.sep}configs{os.sep}')
    return f'{os.path.basename(package)}::{config.replace(os.sep, "/")}'
