import os
import pickle
import subprocess
import sys

import pytest
import torch
from torch import nn

from inline_backbones import MODELS, CheckpointMismatchError, InLineSwinTransformer

yacs_config = pytest.importorskip('yacs.config')

SMALL_ARCH = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])


def _released_config():
    cfg = yacs_config.CfgNode()
    cfg.MODEL = yacs_config.CfgNode()
    cfg.MODEL.TYPE = 'inline_swin'
    cfg.MODEL.NAME = 'inline_swin_tiny'
    cfg.MODEL.SWIN = yacs_config.CfgNode()
    cfg.MODEL.SWIN.DEPTHS = [2, 2, 6, 2]
    cfg.MODEL.SWIN.ATTN_TYPE = 'IIIS'
    cfg.TRAIN = yacs_config.CfgNode()
    cfg.TRAIN.BASE_LR = 1e-3
    cfg.freeze()
    return cfg


def make_released_checkpoint(path, model, num_classes=1000):
    """A file in the released format, built from ``model``'s trunk with random values."""
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
                'config': _released_config()}, path)
    return state


def test_released_tiny_checkpoint_loads_every_trunk_parameter(tmp_path, monkeypatch):
    monkeypatch.delenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', raising=False)
    path = tmp_path / 'inline_swin_t.pth'
    saved = make_released_checkpoint(path, InLineSwinTransformer('tiny'))

    calls = []
    real_load = torch.load

    def recording_load(*args, **kwargs):
        calls.append(kwargs.get('weights_only'))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, 'load', recording_load)
    model = MODELS.build(dict(type='InLineSwinTransformer', arch='tiny',
                              init_cfg=dict(type='Pretrained', checkpoint=str(path))))
    model.init_weights()
    assert calls == [True]
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
    other_layout = InLineSwinTransformer('tiny', attn_type='IISS', init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(CheckpointMismatchError, match=r'(?s)relative_position_bias_table.*unexpected in checkpoint.*residual'):
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


def test_missing_file_is_a_clear_error(tmp_path):
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS',
                                  init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'nope.pth')))
    with pytest.raises(FileNotFoundError, match='nope.pth'):
        model.init_weights()


class _Payload:
    def __reduce__(self):
        return (os.system, ('echo pwned',))


def test_malicious_pickle_is_refused(tmp_path):
    path = tmp_path / 'evil.pth'
    with open(path, 'wb') as f:
        pickle.dump({'model': _Payload()}, f)
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS', init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(RuntimeError, match='weights_only'):
        model.init_weights()


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 1)


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
