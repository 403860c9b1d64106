"""The README's own-config example builds as written: an mmdet Mask R-CNN whose InLine-PVT backbone gets each
image's region from the region preprocessor (not guessed) and trains with the InLine-PVT recipe (AdamW 2e-4),
not the inherited R-50 SGD; its extract_feat runs on a padded batch."""
import re
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def test_readme_config_example_builds_and_runs(tmp_path):
    from mmdet.registry import MODELS
    from mmdet.structures import DetDataSample
    from mmdet.utils import register_all_modules
    from mmengine.config import Config

    block = next(b for b in re.findall(r'```python\n(.*?)```', (ROOT / 'README.md').read_text(), re.S)
                 if '_base_ =' in b)
    (tmp_path / 'own_config.py').write_text(block)
    cfg = Config.fromfile(str(tmp_path / 'own_config.py'))
    assert cfg.optim_wrapper.optimizer.type == 'AdamW' and cfg.optim_wrapper.optimizer.lr == 2e-4
    assert 'momentum' not in cfg.optim_wrapper.optimizer
    register_all_modules()
    model = MODELS.build(cfg.model).eval()
    assert type(model.data_preprocessor).__name__ == 'RegionDetDataPreprocessor' and model.backbone.padding_aware
    images = [torch.randint(0, 255, (3, 64, 96), dtype=torch.uint8), torch.randint(0, 255, (3, 48, 64),
                                                                                  dtype=torch.uint8)]
    samples = [DetDataSample(metainfo=dict(img_shape=tuple(i.shape[1:]))) for i in images]
    with torch.no_grad():
        data = model.data_preprocessor(dict(inputs=images, data_samples=samples))
        feats = model.extract_feat(data['inputs'])
    assert [f.shape[1] for f in feats] == [256] * 5 and data['inputs'].shape[-2:] == (64, 96)
