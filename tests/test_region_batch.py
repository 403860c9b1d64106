"""RegionBatch: a batch tensor that carries each image's region through crops and copies (and nothing else)."""
import copy
import io
import pickle

import pytest
import torch
import torch.nn.functional as F
from padding_cases import small_backbone

from inline_backbones.regions import (
    SHAPES_ATTR,
    RegionBatch,
    _rebuild_region_batch,
    attach_image_shapes,
    attach_sample_shapes,
    infer_image_shapes,
    resolve_regions,
    split_regions,
)

SHAPES = [(100, 120), (60, 70), (90, 30)]


def carried(x):
    assert type(x) is RegionBatch, type(x)
    return getattr(x, SHAPES_ATTR).tolist()


def batch(shapes=SHAPES, size=(100, 120), fill=1.):
    """A padded batch: image i is ``fill``-free random values on its region, zeros elsewhere."""
    x = torch.zeros(len(shapes), 3, *size)
    for i, (h, w) in enumerate(shapes):
        x[i, :, :h, :w] = torch.rand(3, h, w) + fill
    return attach_image_shapes(x, shapes)


def expected_region(shapes, rows, cols, size=(100, 120)):
    """Independent definition: how many of the picked rows (columns) lie inside each image."""
    return [[sum(r < h for r in range(*rows.indices(size[0]))), sum(c < w for c in range(*cols.indices(size[1])))]
            for h, w in shapes]


@pytest.mark.parametrize('rows, cols', [
    (slice(None), slice(None)),
    (slice(48, 112), slice(50, 114)),                 # a slide-inference window, partly in the padding
    (slice(0, 64), slice(32, 96)),
    (slice(64, None), slice(None, 40)),                # image 1 has no row in it: an empty region
    (slice(-30, None), slice(-70, -10)),               # negative bounds
    (slice(1, None, 2), slice(None, None, 3)),         # steps: rows 1, 3, ... of each image
    (slice(90, 10), slice(None)),                      # an empty window
], ids=['all', 'window', 'window2', 'empty-for-one', 'negative', 'steps', 'empty-window'])
def test_crop_carries_each_images_own_region(rows, cols):
    x = batch()
    crop = x[:, :, rows, cols]
    assert carried(crop) == expected_region(SHAPES, rows, cols)
    assert carried(x[..., rows, cols]) == expected_region(SHAPES, rows, cols)
    assert torch.equal(crop.as_subclass(torch.Tensor), x.as_subclass(torch.Tensor)[:, :, rows, cols])
    assert carried(x) == [list(s) for s in SHAPES]               # the batch itself is unchanged


def test_batch_indexing_picks_the_images_regions():
    x = batch()
    assert carried(x[1:]) == [[60, 70], [90, 30]]
    assert carried(x[::2]) == [[100, 120], [90, 30]]
    assert carried(x[[2, 0]]) == [[90, 30], [100, 120]]
    assert carried(x[torch.tensor([2, 0])]) == [[90, 30], [100, 120]]
    assert carried(x[torch.tensor([True, False, True])]) == [[100, 120], [90, 30]]
    assert carried(x[-2:, :, 50:]) == [[10, 70], [40, 30]]
    assert carried(x[:, [2, 1, 0]]) == [list(s) for s in SHAPES]      # a channel reorder keeps the regions
    assert carried(x[:, 1:]) == [list(s) for s in SHAPES]


COPIES = {
    'clone': lambda x: x.clone(),
    'torch.clone': torch.clone,
    'detach': lambda x: x.detach(),
    'torch.detach': torch.detach,
    'to-dtype': lambda x: x.to(torch.float64),
    'to-device': lambda x: x.to('cpu', copy=True),
    'contiguous': lambda x: x.to(memory_format=torch.channels_last).contiguous(),
    'channels_last': lambda x: x.contiguous(memory_format=torch.channels_last),
    'float': lambda x: x.double().float(),
    'half': lambda x: x.half(),
    'bfloat16': lambda x: x.bfloat16(),
    'double': lambda x: x.double(),
    'cpu': lambda x: x.cpu(),
    'type': lambda x: x.type(torch.float64),
    'type_as': lambda x: x.type_as(torch.zeros(1, dtype=torch.float64)),
    'data': lambda x: x.data,
    'deepcopy': copy.deepcopy,
    'pickle': lambda x: pickle.loads(pickle.dumps(x)),
    'torch.save': lambda x: _save_load(x),
}


def _save_load(x):
    buffer = io.BytesIO()
    torch.save(x, buffer)
    buffer.seek(0)
    with torch.serialization.safe_globals([_rebuild_region_batch, RegionBatch]):
        return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize('op', COPIES.values(), ids=COPIES.keys())
def test_copies_carry_the_same_regions(op):
    x = batch()
    y = op(x)
    assert carried(y) == [list(s) for s in SHAPES]
    assert torch.equal(y.as_subclass(torch.Tensor).float(), x.as_subclass(torch.Tensor).to(y.dtype).float())


def test_copies_of_a_crop_carry_the_crops_regions():
    crop = batch()[:, :, 48:112, 50:114]
    expected = expected_region(SHAPES, slice(48, 112), slice(50, 114))
    for op in COPIES.values():
        assert carried(op(crop)) == expected


OTHER_OPS = {
    'add': lambda x: x + 1,
    'mul': lambda x: x * x,
    'neg': lambda x: -x,
    'sub-rev': lambda x: 1 - x,
    'mean': lambda x: x.mean(),
    'interpolate': lambda x: F.interpolate(x, scale_factor=0.5, mode='bilinear'),
    'interpolate-same': lambda x: F.interpolate(x, size=x.shape[-2:], mode='bilinear'),
    'pad': lambda x: F.pad(x, (0, 8, 0, 8)),
    'conv': lambda x: F.conv2d(x, torch.ones(2, 3, 3, 3)),
    'cat': lambda x: torch.cat([x, x]),
    'stack': lambda x: torch.stack([x, x]),
    'new_zeros': lambda x: x.new_zeros(x.shape),
    'zeros_like': torch.zeros_like,
    'permute': lambda x: x.permute(0, 1, 3, 2),
    'transpose': lambda x: x.transpose(-1, -2),
    'flip': lambda x: x.flip(-1),
    'view': lambda x: x.view(3, 3, 120, 100),
    'reshape': lambda x: x.reshape(3, 3, -1),
    'unsqueeze': lambda x: x.unsqueeze(0),
    'split': lambda x: x.split(1)[0],
    'int-index': lambda x: x[0],
    'None-index': lambda x: x[None],
    'spatial-int': lambda x: x[..., 0],
    'spatial-advanced': lambda x: x[:, :, [0, 2]],
    'two-advanced': lambda x: x[[0, 1], [0, 1]],
    'mask': lambda x: x[x > 0],
    'where': lambda x: torch.where(x > 0.5, x, 0.),
    'masked_fill': lambda x: x.masked_fill(x > 0.5, 0.),
    'scalar-tensor-op': lambda x: torch.ones(1) + x,
    'cat-keywords': lambda x: torch.cat(tensors=[x, x]),          # no positional argument
    'permute-list': lambda x: x.permute([0, 1, 3, 2]),             # a second argument that looks like an index
}


@pytest.mark.parametrize('op', OTHER_OPS.values(), ids=OTHER_OPS.keys())
def test_every_other_op_gives_a_plain_tensor(op):
    out = op(batch())
    assert type(out) is torch.Tensor
    assert not hasattr(out, SHAPES_ATTR)


def test_in_place_ops_keep_the_regions_unless_the_geometry_changes():
    x = batch()
    assert x.mul_(2) is x and carried(x) == [list(s) for s in SHAPES]
    x[:, :, :10] = 0
    assert carried(x) == [list(s) for s in SHAPES]
    assert x.float() is x and x.contiguous() is x and x.to(torch.float32) is x   # no-op copies: the object itself
    x.resize_(2, 3, 10, 10)
    assert type(x) is torch.Tensor and not hasattr(x, SHAPES_ATTR)
    y = attach_image_shapes(torch.rand(1, 3, 8, 8), [(8, 4)])
    assert type(y.transpose_(-1, -2)) is torch.Tensor                 # same shape, pixels moved
    y = attach_image_shapes(torch.rand(1, 3, 8, 8), [(8, 4)])
    assert type(y.unsqueeze_(0)) is torch.Tensor


def test_attach_is_in_place_checked_and_split_regions_unwraps():
    x = torch.rand(2, 3, 64, 48)
    assert attach_image_shapes(x, [(64, 48), (30, 20)]) is x
    assert carried(x) == [[64, 48], [30, 20]]
    plain, shapes = split_regions(x)
    assert type(plain) is torch.Tensor and plain.data_ptr() == x.data_ptr() and shapes.tolist() == [[64, 48], [30, 20]]
    assert split_regions(plain)[0] is plain and split_regions(plain)[1] is None
    with pytest.raises(ValueError, match=r'^image 1 has shape \(65, 20\), outside the 64x48 batch input$'):
        attach_image_shapes(torch.rand(2, 3, 64, 48), [(64, 48), (65, 20)])
    assert carried(attach_image_shapes(torch.rand(1, 3, 64, 48), [(60.0, 40.0)])) == [[60, 40]]   # to long
    assert getattr(x, SHAPES_ATTR).dtype == torch.long
    with pytest.raises(ValueError, match='gives 1 images for a batch of 2'):
        attach_image_shapes(torch.rand(2, 3, 64, 48), [(64, 48)])
    g = torch.rand(1, 3, 8, 8, requires_grad=True)
    y = attach_image_shapes(g * 1, [(8, 8)])
    split_regions(y)[0].sum().backward()                  # the plain alias keeps the autograd history
    assert torch.equal(g.grad, torch.ones_like(g))


def test_a_region_batch_made_without_regions_acts_as_a_plain_tensor():
    x = batch().as_subclass(torch.Tensor).as_subclass(RegionBatch)
    assert split_regions(x)[1] is None and type(split_regions(x)[0]) is torch.Tensor
    assert resolve_regions(x).tolist() == [list(s) for s in SHAPES]            # inferred
    for y in (x.clone(), x[:, :, :50], copy.deepcopy(x), x + 1):
        assert not hasattr(y, SHAPES_ATTR)
    assert x.mul_(1) is x and repr(x).endswith('image_shapes=None)')


def test_resolve_regions_order_and_empty_regions():
    x = batch()
    crop = x[:, :, 64:, :64]
    assert resolve_regions(x).tolist() == [list(s) for s in SHAPES]                       # carried
    assert resolve_regions(x, [(1, 1)] * 3).tolist() == [[1, 1]] * 3                      # explicit wins
    assert resolve_regions(x.as_subclass(torch.Tensor)).tolist() == [list(s) for s in SHAPES]   # inferred
    with pytest.raises(ValueError, match='image 1 has an empty region'):
        resolve_regions(crop)


def zero_rows_batch():
    """One image of 100 x 90 pixels padded to 128 x 96 whose last 12 rows are exactly zero (pixels equal
    to the mean, normalised): inference takes them for padding."""
    x = torch.zeros(1, 3, 128, 96)
    x[0, :, :88, :90] = torch.randn(3, 88, 90)
    return attach_image_shapes(x, [(100, 90)])


def test_backbone_reads_the_crops_own_region():
    """A clone's crop reaches the backbone with its own region (the old attribute was lost by clone and
    crop, and the backbone fell back to inference, which is wrong here)."""
    model = small_backbone('tiny', padding_aware=True)
    x = zero_rows_batch()
    crop = x.clone()[:, :, 48:112, 16:80]
    plain = crop.as_subclass(torch.Tensor)
    assert carried(crop) == [[52, 64]]                                      # min(100, 112) - 48 rows
    assert infer_image_shapes(plain).tolist() == [[40, 64]]                 # the guess: 88 - 48 rows
    with torch.no_grad():
        got = model(crop)
        explicit = model(plain, image_shapes=[(52, 64)])
        guessed = model(plain)
        overridden = model(crop, image_shapes=[(40, 64)])
    for a, b, c, d in zip(got, explicit, guessed, overridden, strict=True):
        assert torch.equal(a, b)
        assert torch.equal(c, d)                                          # explicit wins over carried
    assert max((c - b).norm() / b.norm() for b, c in zip(explicit, guessed, strict=True)) > 1e-2


def test_backbone_refuses_a_crop_wholly_in_the_padding():
    model = small_backbone('tiny', padding_aware=True)
    x = attach_image_shapes(torch.rand(1, 3, 128, 96), [(40, 96)])
    with pytest.raises(ValueError, match='empty region'):
        model(x[:, :, 64:])                       # a 64 x 96 crop below the image's 40 rows


def test_backbone_works_on_a_plain_tensor_inside(monkeypatch):
    """Zero overhead: after unwrapping, no operation of the backbone goes through RegionBatch's dispatch;
    without the padding-aware mode the carried regions are ignored."""
    calls = []
    original = RegionBatch.__torch_function__.__func__

    def counting(cls, func, types, args=(), kwargs=None):
        calls.append(func)
        return original(cls, func, types, args, kwargs)

    x = zero_rows_batch()
    monkeypatch.setattr(RegionBatch, '__torch_function__', classmethod(counting))
    for padding_aware in (True, False):
        model = small_backbone('tiny', padding_aware=padding_aware)
        with torch.no_grad():
            outs = model(x)
            ref = model(x.as_subclass(torch.Tensor), image_shapes=[(100, 90)] if padding_aware else None)
        assert calls == [], calls[:5]
        assert all(type(o) is torch.Tensor for o in outs)
        assert all(torch.equal(a, b) for a, b in zip(outs, ref, strict=True))


def test_deepcopy_keeps_shared_references_and_repr_shows_the_regions():
    x = batch()
    a, b = copy.deepcopy([x, x])
    assert a is b and a is not x and carried(a) == [list(s) for s in SHAPES]
    assert getattr(a, SHAPES_ATTR) is not getattr(x, SHAPES_ATTR)             # its own copy of the regions
    assert repr(x) == f'RegionBatch({x.as_subclass(torch.Tensor)!r}, image_shapes={[list(s) for s in SHAPES]})'
    bare = x.as_subclass(torch.Tensor).as_subclass(RegionBatch)
    assert type(pickle.loads(pickle.dumps(bare))) is torch.Tensor            # no regions: a plain tensor back


def test_other_subclasses_get_the_shapes_as_an_attribute():
    class Other(torch.Tensor):
        pass

    x = torch.rand(2, 3, 64, 48).as_subclass(Other)
    assert attach_image_shapes(x, [(64, 48), (30, 20)]) is x and type(x) is Other
    assert resolve_regions(x).tolist() == [[64, 48], [30, 20]]
    assert resolve_regions(x, [(10, 10)] * 2).tolist() == [[10, 10]] * 2      # explicit still wins


def test_sample_shapes_come_from_img_shape_without_channels():
    from types import SimpleNamespace
    samples = [SimpleNamespace(metainfo={'img_shape': (60, 70, 3)}), SimpleNamespace(metainfo={'img_shape': (64, 48)})]
    data = attach_sample_shapes({'inputs': torch.rand(2, 3, 64, 80), 'data_samples': samples})
    assert carried(data['inputs']) == [[60, 70], [64, 48]]
    plain = torch.rand(2, 3, 64, 80)
    assert attach_sample_shapes({'inputs': plain, 'data_samples': []})['inputs'] is plain   # nothing to attach
