"""``init_cfg`` checkpoints given as URLs: downloaded once into torch's hub cache, then loaded with
``weights_only=True`` like a local file; unreachable URLs fail naming the URL. Served from this test
(a local HTTP server and ``file://``), nothing comes from the internet."""
import functools
import http.server
import os
import threading

import pytest
import torch

from inline_backbones import InLineSwinTransformer

SMALL_ARCH = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])


@pytest.fixture
def hub_dir(tmp_path, monkeypatch):
    """An empty torch hub cache for this test ($TORCH_HOME/hub)."""
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    return tmp_path / 'torch_home' / 'hub'


@pytest.fixture
def served(tmp_path):
    """A directory served over HTTP on 127.0.0.1; yields (directory, base URL, request log)."""
    root = tmp_path / 'www'
    root.mkdir()
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f'http://127.0.0.1:{server.server_address[1]}', requests
    server.shutdown()
    server.server_close()


def released_like_file(path):
    """A checkpoint of a random small backbone in the released layout; returns its trunk state."""
    source = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS')
    torch.save({'model': source.state_dict(), 'epoch': 3}, path)
    return {k: v for k, v in source.state_dict().items() if not k.endswith('relative_position_index')}


def load_through_init_cfg(checkpoint):
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS', init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
    model.init_weights()
    return model


def assert_loaded(model, expected):
    state = model.state_dict()
    for key, value in expected.items():
        assert torch.equal(state[key], value), key


def test_http_url_is_downloaded_once_into_the_hub_cache(served, hub_dir):
    root, base, requests = served
    expected = released_like_file(root / 'inline_swin_small_test.pth')
    assert_loaded(load_through_init_cfg(f'{base}/inline_swin_small_test.pth'), expected)
    cached = hub_dir / 'checkpoints' / 'inline_swin_small_test.pth'
    assert cached.is_file() and requests == ['/inline_swin_small_test.pth']
    assert [p.name for p in cached.parent.iterdir()] == ['inline_swin_small_test.pth']  # no partial files
    # A second build reads the cache: no new request (the served file could be gone).
    os.remove(root / 'inline_swin_small_test.pth')
    assert_loaded(load_through_init_cfg(f'{base}/inline_swin_small_test.pth'), expected)
    assert requests == ['/inline_swin_small_test.pth']


def test_file_url(tmp_path, hub_dir):
    expected = released_like_file(tmp_path / 'ckpt.pth')
    assert_loaded(load_through_init_cfg((tmp_path / 'ckpt.pth').as_uri()), expected)
    assert (hub_dir / 'checkpoints' / 'ckpt.pth').is_file()


def test_downloaded_file_is_still_loaded_with_weights_only(served, hub_dir):
    root, base, _ = served

    class Payload:
        def __reduce__(self):
            return (os.system, ('echo pwned',))

    torch.save({'model': {'x': Payload()}}, root / 'evil.pth')
    with pytest.raises(RuntimeError, match='weights_only=True'):
        load_through_init_cfg(f'{base}/evil.pth')


def test_unreachable_url_is_a_clear_error(hub_dir):
    url = 'http://127.0.0.1:9/x.pth'    # discard port: connection refused, as offline
    with pytest.raises(ConnectionError) as err:
        load_through_init_cfg(url)
    message = str(err.value)
    assert url in message and str(hub_dir / 'checkpoints' / 'x.pth') in message
    assert 'init_cfg.checkpoint' in message
    assert not (hub_dir / 'checkpoints' / 'x.pth').exists()


def test_missing_file_on_a_server_is_a_clear_error(served, hub_dir):
    _, base, _ = served
    with pytest.raises(ConnectionError, match='404'):
        load_through_init_cfg(f'{base}/not_there.pth')


def test_url_without_file_name_is_rejected(hub_dir):
    with pytest.raises(ValueError, match='does not end in a file name'):
        load_through_init_cfg('http://127.0.0.1:9/')
