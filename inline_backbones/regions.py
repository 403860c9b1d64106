"""Each image's own region in a zero-padded batch, for the backbone's padding-aware mode.

mmdet's and mmseg's data preprocessors stack images of different sizes into one tensor: each image sits
at the top-left and the rest (bottom rows, right columns) is padding. The padding-aware backbone needs
each image's ``(height, width)`` in pixels. It gets them, in this order of precedence:

1. **Explicit** (always wins): ``backbone(x, image_shapes=...)``.
2. **Carried** by the batch tensor itself: this package's data preprocessors
   (:class:`inline_backbones.RegionDetDataPreprocessor`, :class:`inline_backbones.RegionSegDataPreProcessor`)
   turn their output into a :class:`RegionBatch` that carries each sample's ``img_shape`` (see
   :func:`attach_sample_shapes`), so the repository's configs need no detector or segmentor code and the
   backbone is still called as ``backbone(x)`` (mmdet's ``extract_feat``, mmseg's ``encode_decode``).
3. **Inferred** from the input by :func:`infer_image_shapes` (a guess, see below).

Why a tensor subclass and not a plain attribute: mmseg's slide inference (``test_cfg=dict(mode='slide')``)
crops the batch (``inputs[:, :, y1:y2, x1:x2]``) and hands each crop to the backbone, and other code
clones, detaches or moves the batch. A Python attribute on the tensor is lost by all of these, and the
backbone then silently fell back to the guess. A :class:`RegionBatch` keeps the regions through exactly
the operations that keep the image geometry, and gives each result its *own* regions:

* ``x[...]`` with basic indexing: the batch dimension sliced (or picked by a 1-D integer/bool index) picks
  the images' regions; a slice ``start:stop:step`` of the last two dimensions keeps, for each image, the
  rows (columns) of the window that lie in the image: ``len(range(start, min(stop, h), step))``, so a crop
  ``y1:y2`` keeps ``max(0, min(h, y2) - y1)`` rows. Any other index (integers on any dimension, ``None``,
  several advanced indices, multi-dimensional masks) gives a plain tensor without regions.
* ``clone``, ``detach``, ``to``, ``contiguous``, ``float``/``half``/``double``/``bfloat16``, ``cpu``/``cuda``,
  ``type``, ``type_as``, ``pin_memory``, ``.data`` and ``copy.deepcopy``: the same regions.
* In-place operations return the same object, still carrying its regions (an in-place change of its
  shape or layout, e.g. ``resize_``, ``transpose_``, ``unsqueeze_``, turns it back into a plain tensor).
* **Every other operation returns a plain** ``torch.Tensor``: arithmetic, convolutions, ``F.interpolate``,
  ``F.pad``, ``torch.cat``... Their results have other geometry or other content, so nothing downstream
  carries a stale region, and only the first operation on the batch pays for the subclass.

A crop that lies wholly in the padding of an image carries an empty region (0 rows or columns); the
backbone refuses it with a ValueError when it reads the regions (:func:`check_image_shapes`), never
guessing. The backbone unwraps its input first thing (:func:`split_regions`) and works on the plain tensor.

Inference relies on exactly this: the padding is on the bottom/right and holds exact zeros in every channel
(mmdet/mmseg normalise first, then pad with ``pad_value=0``), and the image's own last row and last column
are not exactly zero in every channel. An image whose bottom rows or right columns normalise to exactly
zero (a pixel equal to the mean in every channel: impossible for uint8 images with the ImageNet means
123.675/116.28/103.53, possible with integer means or float pipelines) is inferred too small, and a
non-zero pad value makes the padding look like image. Use the explicit or carried route wherever that can
happen; inference is only the last resort for a plain tensor.
"""
import copy

import torch

SHAPES_ATTR = 'inline_image_shapes'
_GEOMETRY_ATTR = '_inline_region_geometry'
_Tensor = torch.Tensor

# Operations whose result has the geometry of their first argument (same images, same pixels' places).
_SAME_GEOMETRY = {
    _Tensor.clone, torch.clone, _Tensor.detach, torch.detach, _Tensor.to, _Tensor.contiguous,
    _Tensor.float, _Tensor.half, _Tensor.double, _Tensor.bfloat16, _Tensor.cpu, _Tensor.cuda,
    _Tensor.type, _Tensor.type_as, _Tensor.pin_memory, _Tensor.data.__get__,
}


# In-place operations that move pixels or change the shape: a RegionBatch they return drops its regions.
_IN_PLACE_GEOMETRY = {'transpose_', 't_', 'swapaxes_', 'swapdims_', 'squeeze_', 'unsqueeze_', 'resize_',
                      'resize_as_', 'as_strided_', 'set_'}


def _geometry(tensor):
    """The shape of a tensor as a tuple."""
    return tuple(tensor.shape)


def _carry(tensor, shapes):
    """Make the plain ``tensor`` a :class:`RegionBatch` carrying ``shapes`` (in place, no copy)."""
    geometry = _geometry(tensor)
    tensor.__class__ = RegionBatch
    setattr(tensor, SHAPES_ATTR, shapes)
    setattr(tensor, _GEOMETRY_ATTR, geometry)
    return tensor


def _carried(tensor):
    """The shapes a :class:`RegionBatch` carries (None for one made without them, e.g. by ``as_subclass``)."""
    return tensor.__dict__.get(SHAPES_ATTR)


def _drop(tensor):
    """Turn a :class:`RegionBatch` back into a plain tensor in place."""
    tensor.__class__ = _Tensor
    del tensor.__dict__[SHAPES_ATTR], tensor.__dict__[_GEOMETRY_ATTR]
    return tensor


def _as_index(item):
    """A 1-D index tensor on the host for a list/tuple/tensor index, else None (called on an index torch accepted,
    so a 1-D one holds integers or bools)."""
    if isinstance(item, _Tensor):
        index = item
    elif isinstance(item, (list, tuple)):
        try:
            index = torch.as_tensor(item)
        except (TypeError, ValueError, RuntimeError):
            return None
    else:
        return None
    if index.dim() != 1:
        return None
    return index.cpu()


def _slice_count(window, size, extent):
    """For each image extent ``extent`` (a (B,) long tensor) along a dimension of ``size``: how many of
    the indices the slice ``window`` picks lie inside the image (they are a prefix of the result)."""
    start, stop, step = window.indices(size)
    return torch.div((extent.clamp(max=stop) - start + step - 1).clamp(min=0), step, rounding_mode='floor')


def _indexed_shapes(shape, shapes, index):
    """The regions of ``tensor[index]`` for a tensor of ``shape`` carrying ``shapes``, or None when the
    index is not one whose result has a batch dimension and the two spatial dimensions of its own."""
    ndim = len(shape)
    index = index if isinstance(index, tuple) else (index,)
    ellipses = [i for i, item in enumerate(index) if item is Ellipsis]    # at most one: torch refuses more
    if ellipses:
        e = ellipses[0]
        index = index[:e] + (slice(None),) * (ndim - len(index) + 1) + index[e + 1:]
    if len(index) > ndim:
        return None
    index = index + (slice(None),) * (ndim - len(index))
    advanced = 0
    for dim, item in enumerate(index):
        if isinstance(item, slice):
            continue
        if dim >= ndim - 2 or _as_index(item) is None:
            return None                                  # integers, None, masks, advanced spatial indices
        advanced += 1
    if advanced > 1:
        return None                                      # several advanced indices move and pair dimensions
    first = index[0]
    picked = shapes[first] if isinstance(first, slice) else shapes[_as_index(first)]
    rows = _slice_count(index[ndim - 2], shape[ndim - 2], picked[:, 0])
    cols = _slice_count(index[ndim - 1], shape[ndim - 1], picked[:, 1])
    return torch.stack([rows, cols], dim=1)


class RegionBatch(torch.Tensor):
    """A (B, C, H, W) batch tensor that carries each image's region, ``(height, width)`` in pixels from
    the top-left corner, as a (B, 2) long tensor on the host (attribute ``inline_image_shapes``).

    It is the batch tensor itself (same storage, same autograd history): made in place by
    :func:`attach_image_shapes`, read by :func:`image_shapes_of` / :func:`split_regions`. The regions
    follow the tensor through crops, batch slicing and copies, each result getting its own regions, and
    every other operation returns a plain tensor (see the module doc for the exact list). Entries may be
    0 after a crop that lies in the padding; the backbone refuses such a crop. Treat the shapes as
    read-only: copies of the batch share them (give new ones with :func:`attach_image_shapes`).
    """

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if not all(issubclass(cls, t) for t in types):
            return NotImplemented
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
            source = args[0] if args else None
            if isinstance(out, RegionBatch):
                # The op returned one of its arguments (in place, or a no-op copy such as .float() on a
                # float tensor): still the same images, unless an in-place op changed the geometry.
                geometry = out.__dict__.get(_GEOMETRY_ATTR)
                if geometry is not None and (_geometry(out) != geometry
                                             or getattr(func, '__name__', None) in _IN_PLACE_GEOMETRY):
                    _drop(out)
                return out
            if not isinstance(source, RegionBatch) or not isinstance(out, _Tensor) or _carried(source) is None:
                return out
            if func in _SAME_GEOMETRY:
                if _geometry(out) == _geometry(source):
                    return _carry(out, _carried(source))
                return out
            if func is _Tensor.__getitem__:
                shapes = _indexed_shapes(source.shape, _carried(source), args[1])
                if shapes is not None and shapes.shape[0] == out.shape[0]:
                    return _carry(out, shapes)
            return out

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with torch._C.DisableTorchFunctionSubclass():
            plain = self.as_subclass(_Tensor)
        new = copy.deepcopy(plain, memo)
        if _carried(self) is not None:
            new = _carry(new, _carried(self).clone())
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, proto):
        # Pickle as a plain tensor plus the regions (torch.load's weights_only mode knows no subclass).
        with torch._C.DisableTorchFunctionSubclass():
            plain = self.as_subclass(_Tensor)
        return _rebuild_region_batch, (plain, _carried(self))

    def __repr__(self, *, tensor_contents=None):
        with torch._C.DisableTorchFunctionSubclass():
            plain = self.as_subclass(_Tensor)
            shapes = _carried(self)
            return f'RegionBatch({plain!r}, image_shapes={None if shapes is None else shapes.tolist()})'


def _rebuild_region_batch(plain, shapes):
    return plain if shapes is None else _carry(plain, shapes)


def attach_image_shapes(inputs, image_shapes):
    """Make ``inputs`` carry each image's ``(height, width)`` (a (B, 2) int tensor or a list of pairs):
    ``inputs`` becomes a :class:`RegionBatch` in place (no copy) and is returned. The shapes are checked
    (:func:`check_image_shapes`). A tensor of another subclass keeps its class and gets the shapes as a
    plain attribute, which :func:`resolve_regions` reads but which no operation carries on."""
    shapes = check_image_shapes(image_shapes, inputs)
    if type(inputs) is _Tensor or isinstance(inputs, RegionBatch):
        return _carry(inputs, shapes)
    setattr(inputs, SHAPES_ATTR, shapes)
    return inputs


def split_regions(inputs):
    """``(plain tensor, carried shapes or None)``: what a backbone does first thing in its forward.

    For a :class:`RegionBatch`, a plain ``torch.Tensor`` alias of it (same storage, same autograd
    history; everything the backbone does with it then runs without the subclass's Python dispatch) and
    its (B, 2) long host shapes, unchecked (entries may be 0 after a crop in the padding: check them with
    :func:`resolve_regions` / :func:`check_image_shapes`). Any other tensor comes back as it is with None.
    Use in a forward as::

        x, carried = split_regions(x)
        if self.padding_aware:
            regions = resolve_regions(x, image_shapes, carried)
    """
    if isinstance(inputs, RegionBatch):
        shapes = _carried(inputs)
        with torch._C.DisableTorchFunctionSubclass():
            return inputs.as_subclass(_Tensor), shapes
    return inputs, None


def check_image_shapes(image_shapes, inputs):
    """(B, 2) long tensor on the host; raise ValueError unless 1 <= h <= H and 1 <= w <= W.

    The shapes stay on the host (a device tensor is copied once): every decision taken from them (which
    maps to mask, how to cut windows) then costs no device synchronisation; masks are built on the
    device from them (:func:`.masks.region_mask`). An empty region (0 rows or columns: a crop of the batch that
    lies wholly in an image's padding) is refused with its own message."""
    shapes = torch.as_tensor(image_shapes, dtype=torch.long, device='cpu').reshape(-1, 2)
    B, *_, H, W = inputs.shape
    if shapes.shape[0] != B:
        raise ValueError(f'image_shapes gives {shapes.shape[0]} images for a batch of {B}')
    empty = shapes.eq(0).any(1)
    if empty.any():
        i = int(empty.nonzero()[0])
        raise ValueError(f'image {i} has an empty region {tuple(shapes[i].tolist())} in the {H}x{W} input (a '
                         f'crop that lies wholly in its padding?): the padding-aware backbone has no pixel '
                         f'of the image to look at')
    bad = (shapes < 1).any(1) | (shapes[:, 0] > H) | (shapes[:, 1] > W)
    if bad.any():
        i = int(bad.nonzero()[0])
        raise ValueError(f'image {i} has shape {tuple(shapes[i].tolist())}, outside the {H}x{W} batch input')
    return shapes


def infer_image_shapes(inputs):
    """(B, 2) on the host: one past the last row / column holding a non-zero value in any channel (see
    module doc). One device-to-host copy per batch."""
    nonzero = inputs.ne(0).any(dim=1)                                           # (B, H, W)
    rows, cols = nonzero.any(dim=2), nonzero.any(dim=1)
    height = (rows * torch.arange(1, rows.shape[1] + 1, device=inputs.device)).amax(1)
    width = (cols * torch.arange(1, cols.shape[1] + 1, device=inputs.device)).amax(1)
    shapes = torch.stack([height, width], dim=1).cpu()
    empty = shapes[:, 0].eq(0)
    if empty.any():
        raise ValueError(f'image {int(empty.nonzero()[0])} of the batch is exactly zero everywhere, so its '
                         f'region cannot be inferred: pass image_shapes explicitly')
    return shapes


def resolve_regions(inputs, image_shapes=None, carried=None):
    """Each image's region, (B, 2) long on the host: the one place that decides where it comes from.

    The explicit ``image_shapes`` if given, else the ``carried`` ones (what :func:`split_regions` took off a
    :class:`RegionBatch`), else the attribute :func:`attach_image_shapes` sets on other tensor subclasses, else
    the inferred ones (:func:`infer_image_shapes`). Explicit and carried shapes are checked
    (:func:`check_image_shapes`: ValueError on an empty region or one outside the input)."""
    if image_shapes is None:
        image_shapes = carried if carried is not None else getattr(inputs, SHAPES_ATTR, None)
    if image_shapes is None:
        return infer_image_shapes(inputs)
    return check_image_shapes(image_shapes, inputs)


def attach_sample_shapes(data):
    """Make ``data['inputs']`` carry each data sample's ``img_shape`` (the image before padding, after
    any batch augment that rescales it): the route of this package's mmdet/mmseg data preprocessors
    (see :func:`attach_image_shapes`). Returns ``data``."""
    samples = data.get('data_samples')
    if samples:
        data['inputs'] = attach_image_shapes(data['inputs'], [sample.metainfo['img_shape'][:2] for sample in samples])
    return data
