"""Pixels left in 0-255 by a data preprocessor without ``mean``/``std``: the package's preprocessors warn once in the
log (the backbone's forward does not look, so as not to wait for the device)."""
import pytest
import torch

pytest.importorskip('mmdet')
pytest.importorskip('mmseg')
from mmdet.structures import DetDataSample  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402
from mmseg.structures import SegDataSample  # noqa: E402

from inline_backbones.openmmlab.det_preprocessor import RegionDetDataPreprocessor  # noqa: E402
from inline_backbones.openmmlab.pixel_check import RAW_PIXEL_LIMIT, raw_pixel_message  # noqa: E402
from inline_backbones.openmmlab.seg_preprocessor import RegionSegDataPreProcessor  # noqa: E402

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def test_normalised_pixels_pass_and_raw_ones_are_named():
    pixels = torch.arange(256.).view(1, 1, 16, 16).expand(1, 3, 16, 16)
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    assert raw_pixel_message((pixels - mean) / std, 'P') is None          # within +-2.7
    assert raw_pixel_message(torch.full((1, 3, 4, 4), RAW_PIXEL_LIMIT), 'P') is None
    message = raw_pixel_message(pixels, 'P')
    assert message.startswith('P: the batch reaches 255 after normalisation, as 0-255 pixels do')
    assert 'mean (123.675, 116.28, 103.53) and std (58.395, 57.12, 57.375)' in message
    assert raw_pixel_message(-pixels, 'P').startswith('P: the batch reaches 255 ')
    assert raw_pixel_message(torch.zeros(0, 3, 4, 4), 'P') is None


def _batch(task, sizes=((32, 40), (32, 40))):
    inputs = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8) for h, w in sizes]
    samples = [(DetDataSample if task == 'det' else SegDataSample)(metainfo=dict(img_shape=s, ori_shape=s,
                                                                                pad_shape=s)) for s in sizes]
    return dict(inputs=inputs, data_samples=samples)


@pytest.mark.parametrize('task', ['det', 'seg'])
def test_preprocessors_warn_once_in_the_log(task, tmp_path):
    """Without mean/std the first batch is named in the current logger's log, once; with ImageNet's, nothing."""
    log = tmp_path / 'run.log'
    MMLogger.get_instance(f'pixel_check_{task}', log_file=str(log))
    cls = RegionDetDataPreprocessor if task == 'det' else RegionSegDataPreProcessor
    raw = cls()
    for _ in range(3):
        raw(_batch(task))
    normalised = cls(mean=MEAN, std=STD)
    normalised(_batch(task))
    text = log.read_text()
    assert text.count('after normalisation, as 0-255 pixels do') == 1, text
    assert f'{cls.__name__}: the batch reaches 25' in text and 'WARNING' in text
