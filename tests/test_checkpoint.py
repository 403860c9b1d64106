"""Checkpoint loading: the released format, detector prefixes, strict key checks (a model without a family's key
filter loaded as it is), error paths, and the ``weights_only`` protection (payloads written the way an attacker would,
the ``getattr`` guard)."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import released_fixtures as rf
import torch
from mmengine.logging import HistoryBuffer
from torch import nn

from inline_backbones import MODELS, CheckpointMismatchError, InLineSwinTransformer, load_pretrained
from inline_backbones.checkpoints.loading import FilteredStateDict, load_checkpoint_file
from inline_backbones.openmmlab.checkpoints import allow_mmengine_checkpoints

SMALL_ARCH = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])


def make_released_checkpoint(path, model, num_classes=1000):
    """A file in the released layout, built from ``model``'s trunk with random values.

    (The real files also pickle a yacs ``CfgNode`` as ``config``; the authors' fixtures carry one, see
    ``test_released_fixture_loads_every_trunk_parameter``. Here a plain dict stands in, so no yacs.)
    """
    state = {k: torch.randn_like(v) for k, v in model.state_dict().items() if not k.startswith('norm')}
    last = model.num_features[-1]
    extra = {'norm.weight': torch.randn(last), 'norm.bias': torch.randn(last),
             'head.weight': torch.randn(num_classes, last), 'head.bias': torch.randn(num_classes)}
    for name, module in model.named_modules():
        if hasattr(module, 'relative_position_index'):
            extra[f'{name}.relative_position_index'] = module.relative_position_index.clone()
        if name.endswith('blocks.1'):
            extra[f'{name}.attn_mask'] = torch.zeros(4, 49, 49)
    torch.save({'model': {**state, **extra}, 'optimizer': {'state': {}, 'param_groups': [{'lr': 1e-3}]},
                'lr_scheduler': {'last_epoch': 299}, 'max_accuracy': 82.4, 'epoch': 299,
                'config': {'MODEL': {'TYPE': 'inline_swin', 'SWIN': {'DEPTHS': [2, 2, 6, 2]}}}}, path)
    return state


def _recording_torch_load(monkeypatch):
    """Record the keyword arguments of every ``torch.load`` (the package must pass these two)."""
    calls = []
    real_load = torch.load

    def recording_load(*args, **kwargs):
        calls.append((kwargs.get('map_location'), kwargs.get('weights_only')))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, 'load', recording_load)
    return calls


def test_released_fixture_loads_every_trunk_parameter(monkeypatch):
    """The authors' file (with its pickled yacs ``CfgNode``, yacs not needed) loads through ``init_cfg``
    with one ``weights_only=True`` load; every trunk tensor comes from the file, the classifier, the final
    norm and the buffers are dropped, the output norms keep their init."""
    monkeypatch.delenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', raising=False)
    path = rf.checkpoint_path('IIMS2')
    released = load_checkpoint_file(path)
    assert released['config']['MODEL']['TYPE'] and released['epoch'] >= 0
    released, arch = released['model'], rf.mini_arch('IIMS2')
    calls = _recording_torch_load(monkeypatch)
    model = MODELS.build(dict(type='InLineSwinTransformer', arch=arch, attn_type='IIMS2',
                              init_cfg=dict(type='Pretrained', checkpoint=str(path))))
    model.init_weights()
    assert calls == [('cpu', True)]
    own = model.state_dict()
    trunk = [k for k in own if not k.startswith(('norm0.', 'norm1.', 'norm2.', 'norm3.'))]
    for key in trunk:
        assert torch.equal(own[key], released[key]), key
    dropped = {k for k in released if k not in own}
    assert dropped and all(k.startswith(('head.', 'norm.')) or k.endswith(('relative_position_index', 'attn_mask'))
                           for k in dropped), dropped
    assert torch.equal(own['norm3.weight'], torch.ones_like(own['norm3.weight']))


def test_released_tiny_checkpoint_loads_every_trunk_parameter(tmp_path, monkeypatch):
    monkeypatch.delenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', raising=False)
    path = tmp_path / 'inline_swin_t.pth'
    saved = make_released_checkpoint(path, InLineSwinTransformer('tiny'))
    calls = _recording_torch_load(monkeypatch)
    model = MODELS.build(dict(type='InLineSwinTransformer', arch='tiny',
                              init_cfg=dict(type='Pretrained', checkpoint=str(path))))
    model.init_weights()
    assert calls == [('cpu', True)]
    own = model.state_dict()
    for key, value in saved.items():
        assert torch.equal(own[key], value), key
    trunk = [k for k in own if not k.startswith('norm')]
    assert sorted(trunk) == sorted(saved)          # nothing of the trunk is left at its random init


def test_detector_checkpoint_with_prefix(tmp_path):
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS')
    state = {f'backbone.{k}': torch.randn_like(v) for k, v in model.state_dict().items()}
    state['neck.conv.weight'] = torch.randn(3)
    torch.save({'meta': {}, 'state_dict': state}, tmp_path / 'det.pth')
    loaded = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS', init_cfg=dict(
        type='Pretrained', checkpoint=str(tmp_path / 'det.pth'), prefix='backbone.'))
    loaded.init_weights()
    for key, value in loaded.state_dict().items():
        assert torch.equal(value, state[f'backbone.{key}']), key


def test_checkpoint_of_another_arch_fails_naming_keys(tmp_path):
    path = tmp_path / 'tiny.pth'
    make_released_checkpoint(path, InLineSwinTransformer('tiny'))
    small = InLineSwinTransformer('small', init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(CheckpointMismatchError, match=r'missing in checkpoint \(\d+\): .*layers\.2\.blocks\.6\.'):
        small.init_weights()
    other_layout = InLineSwinTransformer('tiny', attn_type='IISS',
                                         init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(CheckpointMismatchError,
                       match=r'(?s)relative_position_bias_table.*unexpected in checkpoint.*residual'):
        other_layout.init_weights()


def test_shape_mismatch_and_unknown_keys_fail(tmp_path):
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS')
    state = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    state['layers.0.blocks.0.attn.qkv.weight'] = torch.randn(10, 32)
    state['layers.0.blocks.0.attn.extra_pos'] = torch.randn(3)
    torch.save({'model': state}, tmp_path / 'bad.pth')
    model.init_cfg = dict(type='Pretrained', checkpoint=str(tmp_path / 'bad.pth'))
    with pytest.raises(CheckpointMismatchError) as err:
        model.init_weights()
    assert 'layers.0.blocks.0.attn.qkv.weight: checkpoint (10, 32) vs model (96, 32)' in str(err.value)
    assert 'layers.0.blocks.0.attn.extra_pos' in str(err.value)


def _mismatch_message(path, **lists):
    """The message load_pretrained must give, written out: one line per non-empty list, 20 keys at most."""
    lines = [f'checkpoint {path!r} does not fit InLineSwinTransformer (check arch, attn_type and that this '
             f'is an InLine-Swin checkpoint):']
    for title, keys in lists.items():
        if keys:
            lines.append(f'  {title.replace("_", " ")} ({len(keys)}): ' + ', '.join(keys[:20])
                         + (' ...' if len(keys) > 20 else ''))
    return '\n'.join(lines)


@pytest.mark.parametrize('num_missing, num_unexpected, num_mismatched', [(21, 1, 1), (20, 0, 0), (0, 1, 0), (0, 0, 1)])
def test_mismatch_message_lists_the_keys(tmp_path, num_missing, num_unexpected, num_mismatched):
    """Any one kind of problem fails the load; the message lists each kind, cut after 20 keys."""
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS')
    state = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    keys = [k for k in state if not k.startswith('norm')]
    missing = keys[:num_missing]
    for k in missing:
        del state[k]
    unexpected = [f'layers.0.extra{i}' for i in range(num_unexpected)]
    state.update({k: torch.zeros(1) for k in unexpected})
    mismatched = []
    for k in keys[len(keys) - num_mismatched:]:
        state[k] = torch.zeros(2, 3)
        mismatched.append(f'{k}: checkpoint (2, 3) vs model {tuple(model.state_dict()[k].shape)}')
    path = str(tmp_path / 'ckpt.pth')
    torch.save({'model': state}, path)
    with pytest.raises(CheckpointMismatchError) as err:
        load_pretrained(model, path)
    assert str(err.value) == _mismatch_message(path, missing_in_checkpoint=missing,
                                               unexpected_in_checkpoint=unexpected, shape_mismatch=mismatched)


def test_non_tensor_entries_are_listed_ten_at_most(tmp_path):
    bad = [f'layers.0.meta{i:02d}' for i in range(12)]
    torch.save({'model': _small_state(**{k: 'not a tensor' for k in bad})}, tmp_path / 'meta.pth')
    with pytest.raises(TypeError) as err:
        load_pretrained(InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS'), tmp_path / 'meta.pth')
    assert str(err.value) == f'checkpoint entries are not tensors: {bad[:10]}; is this a model state dict?'


def test_model_without_filter_loads_as_is_and_strictly(tmp_path):
    """The generic loader's default for a model with no ``checkpoint_filter`` is the identity; an explicit
    ``filter_fn`` replaces the model's."""
    torch.save({'state_dict': {'weight': torch.ones(2, 3), 'bias': torch.zeros(2)}}, tmp_path / 'lin.pth')
    linear = nn.Linear(3, 2)
    assert load_pretrained(linear, tmp_path / 'lin.pth') == ['bias', 'weight']
    assert torch.equal(linear.weight, torch.ones(2, 3))
    torch.save({'weight': torch.ones(2, 3), 'bias': torch.zeros(2), 'extra': torch.zeros(1)}, tmp_path / 'extra.pth')
    with pytest.raises(CheckpointMismatchError,
                       match=r"does not fit Linear:\n  unexpected in checkpoint \(1\): extra$"):
        load_pretrained(linear, tmp_path / 'extra.pth')
    drop_extra = lambda sd, model: FilteredStateDict({k: v for k, v in sd.items() if k != 'extra'},  # noqa: E731
                                                     optional_prefixes=('bias',))
    assert load_pretrained(linear, tmp_path / 'extra.pth', filter_fn=drop_extra) == ['bias', 'weight']
    torch.save({'weight': torch.ones(2, 3)}, tmp_path / 'no_bias.pth')
    assert load_pretrained(linear, tmp_path / 'no_bias.pth', filter_fn=drop_extra) == ['weight']
    with pytest.raises(CheckpointMismatchError, match=r'missing in checkpoint \(1\): bias'):
        load_pretrained(linear, tmp_path / 'no_bias.pth')


def test_missing_file_is_a_clear_error(tmp_path):
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS',
                                  init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'nope.pth')))
    with pytest.raises(FileNotFoundError, match='nope.pth'):
        model.init_weights()


def _small_state(**overrides):
    source = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS')
    state = {k: torch.randn_like(v) for k, v in source.state_dict().items()}
    return {**state, **overrides}


def test_data_parallel_module_prefix_is_stripped(tmp_path):
    state = _small_state()
    torch.save({'state_dict': {f'module.{k}': v for k, v in state.items()}}, tmp_path / 'dp.pth')
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS')
    assert load_pretrained(model, tmp_path / 'dp.pth') == sorted(state)
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_prefix_that_matches_nothing_is_an_error(tmp_path):
    torch.save({'state_dict': _small_state()}, tmp_path / 'bare.pth')
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS')
    with pytest.raises(KeyError, match="no key of the checkpoint starts with prefix 'backbone.'"):
        load_pretrained(model, tmp_path / 'bare.pth', prefix='backbone.')


def test_non_tensor_entries_and_non_dict_checkpoints_are_errors(tmp_path):
    torch.save({'model': _small_state(**{'layers.0.blocks.0.attn.qkv.weight': [1.0, 2.0]})}, tmp_path / 'list.pth')
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS')
    with pytest.raises(TypeError, match=r"not tensors: \['layers\.0\.blocks\.0\.attn\.qkv\.weight'\]"):
        load_pretrained(model, tmp_path / 'list.pth')
    torch.save([torch.zeros(1)], tmp_path / 'list_file.pth')
    with pytest.raises(TypeError, match='checkpoint is a list, expected a dict'):
        load_pretrained(model, tmp_path / 'list_file.pth')


def _entries(path):
    """``(name, start, end)`` of each entry of a whole zip archive, in file order: its header's offset and where the
    next entry's header (the directory, for the last one) starts; zipfile reads both from the archive's directory."""
    import zipfile

    with zipfile.ZipFile(path) as whole:
        infos = sorted(whole.infolist(), key=lambda i: i.header_offset)
        starts = [i.header_offset for i in infos]
        return [(i.filename, s, e) for i, s, e in zip(infos, starts, starts[1:] + [whole.start_dir], strict=True)]


def test_truncated_file_is_a_clear_error(tmp_path):
    """A file cut in the middle of an entry says it is cut off (its size, the entry it stops in and where that entry
    starts), not that it is unsafe; through ``init_cfg`` as through any load."""
    path = tmp_path / 'cut.pth'
    torch.save({'model': _small_state()}, path)
    data = path.read_bytes()
    cut = len(data) // 2
    name, start, _ = next(e for e in _entries(path) if e[2] > cut)
    path.write_bytes(data[:cut])
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS',
                                  init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(RuntimeError, match=rf"^checkpoint '.*cut\.pth' is cut off: the file has {cut:,} bytes and "
                       rf"stops inside its entry '{name}' \(from byte {start:,}\); the end record of the archive "
                       r'\(which every torch\.save file ends with\) is missing\. The download or copy stopped '
                       r'part-way: fetch the file again$') as err:
        model.init_weights()
    assert 'safely' not in str(err.value)


@pytest.mark.parametrize('where', ['entry', 'descriptor', 'header', 'directory', 'end record'])
def test_truncation_is_found_wherever_the_file_stops(tmp_path, where):
    """Cut inside an entry's data or its data descriptor (the entry is named), inside an entry's header, between the
    last entry and the directory, or inside the end record: each is cut off; the whole file, a non-zip file and a
    whole file whose end record carries a comment are not."""
    from inline_backbones.checkpoints.archive import truncation_problem

    path = tmp_path / 'whole.pth'
    torch.save({'w': torch.randn(64, 64), 'b': torch.randn(64)}, path)
    data = path.read_bytes()
    entries = _entries(path)
    assert truncation_problem(path) is None
    name, start, end = max(entries, key=lambda e: e[2] - e[1])                     # the 64x64 tensor's entry
    directory = entries[-1][2]
    cut = {'entry': (start + end) // 2, 'descriptor': end - 3, 'header': entries[1][1] + 10, 'directory': directory,
           'end record': len(data) - 5}[where]
    (tmp_path / 'cut.pth').write_bytes(data[:cut])
    problem = truncation_problem(tmp_path / 'cut.pth')
    if where in ('entry', 'descriptor'):
        assert problem == (f'the file has {cut:,} bytes and stops inside its entry {name!r} (from byte {start:,}); '
                           'the end record of the archive (which every torch.save file ends with) is missing')
    else:
        whole_to = entries[1][1] if where == 'header' else directory
        assert problem == (f'the file has {cut:,} bytes and its entries are whole up to byte {whole_to:,}, but the '
                           'end record of the archive (which every torch.save file ends with) is missing')
    (tmp_path / 'pickle.pth').write_bytes(pickle.dumps({'w': 1}))
    assert truncation_problem(tmp_path / 'pickle.pth') is None
    commented = data[:-2] + (5).to_bytes(2, 'little') + b'hello'     # an end record with a 5-byte comment
    (tmp_path / 'comment.pth').write_bytes(commented)
    assert truncation_problem(tmp_path / 'comment.pth') is None
    assert torch.load(tmp_path / 'comment.pth', weights_only=True)['w'].shape == (64, 64)   # a whole archive indeed


class _CreatesFile:
    """Unpickling this calls ``open(path, 'w')``: the file appearing shows that the payload ran."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, 'w'))


def _write_payload(path, how, marker):
    payload = {'model': {'x': _CreatesFile(marker)}}
    if how == 'torch.save':                      # torch's own zip format, what a .pth file normally is
        torch.save(payload, path)
    else:
        with open(path, 'wb') as f:
            pickle.dump(payload, f, protocol=how)


@pytest.mark.parametrize('how', ['torch.save', 2, 4])
def test_malicious_checkpoint_is_refused_without_running_its_payload(tmp_path, how):
    path, marker = tmp_path / 'evil.pth', tmp_path / 'payload_ran'
    _write_payload(path, how, marker)
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS',
                                  init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(RuntimeError, match=r'cannot load checkpoint .*evil\.pth.* safely \(weights_only=True\)') as err:
        model.init_weights()
    assert 'UnpicklingError' in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__   # torch's error advises weights_only=False
    assert 'False' not in str(err.value) and 'TORCH_FORCE' not in str(err.value)
    if how != 4:     # torch's weights-only unpickler names the forbidden global (protocol 4 stops earlier)
        assert 'open' in str(err.value), str(err.value)
    assert not marker.exists(), 'the payload ran'


@pytest.mark.parametrize('how', ['torch.save', 2, 4])
def test_the_payload_is_live(tmp_path, how):
    """Control for the test above: read without the protection, the same files run their payload."""
    path, marker = tmp_path / 'evil.pth', tmp_path / 'payload_ran'
    _write_payload(path, how, marker)
    if how == 'torch.save':
        loaded = torch.load(path, weights_only=False)
    else:
        with open(path, 'rb') as f:
            loaded = pickle.load(f)
    loaded['model']['x'].close()
    assert marker.exists()


class _Getattr:
    """Pickles as ``builtins.getattr(owner, name)``, the way mmengine stores HistoryBuffer statistics."""

    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    def __reduce__(self):
        return (getattr, (self.owner, self.name))


def test_getattr_in_checkpoints_is_limited_to_history_buffer_statistics(tmp_path):
    torch.save({'stat': _Getattr(HistoryBuffer, 'mean')}, tmp_path / 'ok.pth')
    assert load_checkpoint_file(tmp_path / 'ok.pth')['stat'] is HistoryBuffer.mean
    for owner, name in ((HistoryBuffer, '__init__'), (HistoryBuffer, 'update'), (np.ndarray, 'min')):
        torch.save({'stat': _Getattr(owner, name)}, tmp_path / 'bad.pth')
        with pytest.raises(RuntimeError, match='only HistoryBuffer statistics methods are allowed'):
            load_checkpoint_file(tmp_path / 'bad.pth')


RUNNER_DTYPES = ('bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64', 'float16',
                 'float32', 'float64')


def test_allow_list_is_what_runner_checkpoints_need(tmp_path):
    """With torch's allow-list emptied, such a file is refused; ``allow_mmengine_checkpoints`` alone makes
    it load: a HistoryBuffer (with its statistics methods), numpy arrays, scalars and dtypes."""
    buffer = HistoryBuffer()
    for value in (1.0, 2.0, 4.5):
        buffer.update(value)
    content = {'hub': {'loss': buffer}, 'stat': _Getattr(HistoryBuffer, 'max'),
               'arrays': [np.arange(3).astype(t) for t in RUNNER_DTYPES],
               'scalars': [np.arange(2).astype(t)[1] for t in RUNNER_DTYPES],
               'dtypes': [np.dtype(t) for t in RUNNER_DTYPES]}
    torch.save(content, tmp_path / 'runner.pth')
    registered = torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    try:
        with pytest.raises(RuntimeError, match='weights_only=True'):
            load_checkpoint_file(tmp_path / 'runner.pth')
        allow_mmengine_checkpoints()
        loaded = load_checkpoint_file(tmp_path / 'runner.pth')
    finally:
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(registered)
    assert loaded['hub']['loss'].mean() == buffer.mean() and loaded['hub']['loss'].current() == 4.5
    assert loaded['stat'] is HistoryBuffer.max
    for t, array, scalar, dtype in zip(RUNNER_DTYPES, loaded['arrays'], loaded['scalars'], loaded['dtypes'],
                                       strict=True):
        assert array.dtype == np.dtype(t) and (array == np.arange(3).astype(t)).all(), t
        assert scalar.dtype == np.dtype(t) and scalar == 1 and dtype == np.dtype(t), t


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 1)


@pytest.mark.slow
def test_mmengine_runner_checkpoints_load_safely(tmp_path):
    """A checkpoint of mmengine's Runner (HistoryBuffer, numpy arrays) loads with weights_only=True."""
    from mmengine.model import BaseModel
    from mmengine.runner import Runner

    class Model(BaseModel):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(2, 1)

        def forward(self, inputs, labels, mode='tensor'):
            out = self.linear(torch.stack(inputs)).squeeze(-1)
            return dict(loss=(out - torch.stack(labels)).square().mean()) if mode == 'loss' else out

    dataset = [dict(inputs=torch.randn(2), labels=torch.tensor(1.0)) for _ in range(8)]
    common = dict(
        model=Model(), work_dir=str(tmp_path),
        train_dataloader=dict(dataset=dataset, sampler=dict(type='DefaultSampler', shuffle=False),
                              batch_size=2, collate_fn=dict(type='pseudo_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
        train_cfg=dict(by_epoch=True, max_epochs=1),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1)),
        default_scope='mmengine')
    runner = Runner(**common, experiment_name='first')
    runner.train()
    ckpt_path = tmp_path / 'epoch_1.pth'
    assert ckpt_path.exists()
    assert os.environ.get('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD') is None

    # In fresh interpreters, with torch's default weights_only=True: refused without our allow-list,
    # loaded with it (importing the package is what custom_imports does).
    load = f"import torch; print(torch.load({str(ckpt_path)!r}, map_location='cpu')['meta']['epoch'])"
    bare = subprocess.run([sys.executable, '-c', load], capture_output=True, text=True)
    assert bare.returncode != 0 and 'Weights only load failed' in bare.stderr
    allowed = subprocess.run([sys.executable, '-c', 'import inline_backbones; ' + load],
                             capture_output=True, text=True)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.split()[-1] == '1'

    resumed = Runner(**{**common, 'train_cfg': dict(by_epoch=True, max_epochs=2)},
                     experiment_name='second', resume=True, load_from=str(ckpt_path))
    resumed.train()
    assert resumed.epoch == 2 and resumed.iter == 8


def test_mmengine_local_loads_give_the_packages_errors(tmp_path, monkeypatch):
    """``load_from``, ``--resume``, ``mim test`` and tools read checkpoints through mmengine's CheckpointLoader: a
    damaged or unsafe file gets the package's error (file named, safe loading kept), never torch's advice to turn
    ``weights_only`` off; a good file loads."""
    import traceback

    from mmengine.runner import CheckpointLoader, load_checkpoint

    from inline_backbones.openmmlab.checkpoints import route_mmengine_local_loads

    route_mmengine_local_loads()   # (done at import; again here, so that the routing itself is what runs)
    model = nn.Linear(2, 1)
    (tmp_path / 'damaged.pth').write_bytes(b'not a checkpoint')
    refused = r"cannot load checkpoint .*damaged.pth' safely \(weights_only=True\)"
    with pytest.raises(RuntimeError, match=refused) as err:
        load_checkpoint(model, str(tmp_path / 'damaged.pth'), map_location='cpu')
    text = ''.join(traceback.format_exception(err.type, err.value, err.tb))
    assert 'weights_only=False' not in text and 'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD' not in text
    with pytest.raises(FileNotFoundError, match=f"^checkpoint file not found: '{tmp_path}/missing.pth'$"):
        load_checkpoint(model, str(tmp_path / 'missing.pth'))
    torch.save({'state_dict': {'weight': torch.ones(1, 2), 'bias': torch.zeros(1)}}, tmp_path / 'good.pth')
    load_checkpoint(model, str(tmp_path / 'good.pth'), map_location='cpu', strict=True)
    assert torch.equal(model.weight, torch.ones(1, 2))
    monkeypatch.setenv('HOME', str(tmp_path))                       # '~' is the user's home
    loaded = CheckpointLoader.load_checkpoint('~/good.pth', map_location='meta')
    assert loaded['state_dict']['weight'].device.type == 'meta'     # map_location reaches torch.load


def test_the_log_names_the_file_the_backbone_weights_came_from(tmp_path):
    """``init_cfg`` loads write one line into the current mmengine logger (a Runner's training log): the file, the
    number of tensors and the first 12 hex digits of the file's SHA-256."""
    import hashlib

    from mmengine.logging import MMLogger

    state = _small_state()
    torch.save({'state_dict': state}, tmp_path / 'w.pth')
    log = tmp_path / 'run.log'
    MMLogger.get_instance('checkpoint_log_test', log_file=str(log))
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS',
                                  init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'w.pth')))
    model.init_weights()
    digest = hashlib.sha256((tmp_path / 'w.pth').read_bytes()).hexdigest()
    line = f"InLineSwinTransformer: {len(state)} tensors loaded from '{tmp_path}/w.pth', sha256 {digest[:12]}\n"
    assert log.read_text().count(line) == 1
    model.init_cfg['sha256'] = digest.upper()             # checked against the file, then the same line
    model.init_weights()
    assert log.read_text().count(line) == 2
