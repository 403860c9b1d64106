"""``init_cfg`` checkpoints given as URLs, as the authors release them (``https://cloud.tsinghua.edu.cn/f/<id>/?dl=1``):
downloaded once into torch's hub cache under a name keyed by the whole URL, kept only if they load as a
checkpoint with ``weights_only=True``, then loaded like a local file. Served from this test by a loopback
HTTP server (and ``file://``); nothing comes from the internet."""
import hashlib
import io
import os
import re
import socket
import time
import traceback

import pytest
import torch

from inline_backbones import InLineSwinTransformer
from inline_backbones.checkpoints.loading import (
    CheckpointDownloadError,
    cache_path,
    download_checkpoint,
    load_checkpoint_file,
)

SMALL_ARCH = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])
HTML = b'<!DOCTYPE html>\n<html><head><title>Share link expired</title></head><body>Sorry</body></html>\n'


@pytest.fixture
def hub_dir(tmp_path, monkeypatch):
    """An empty torch hub cache for this test ($TORCH_HOME/hub)."""
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    return tmp_path / 'torch_home' / 'hub'


def checkpoint_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def released_like(seed):
    """A checkpoint of a random small backbone in the released layout (bytes) and its trunk state."""
    torch.manual_seed(seed)
    source = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS')
    state = source.state_dict()
    trunk = {k: v for k, v in state.items() if not k.endswith('relative_position_index')}
    return checkpoint_bytes({'model': state, 'epoch': 3}), trunk


def load_through_init_cfg(checkpoint, **init_cfg):
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS',
                                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint, **init_cfg))
    model.init_weights()
    return model


def assert_loaded(model, expected):
    state = model.state_dict()
    for key, value in expected.items():
        assert torch.equal(state[key], value), key


def cached(hub_dir):
    folder = hub_dir / 'checkpoints'
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def assert_no_unsafe_advice(excinfo):
    """Neither the error nor anything chained to it suggests loading without the weights_only protection."""
    text = ''.join(traceback.format_exception(excinfo.type, excinfo.value, excinfo.tb))
    for unsafe in ('weights_only=False', 'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', 'set to `False`', 'add_safe_globals'):
        assert unsafe not in text, text


def share(base, share_id):
    return f'{base}/f/{share_id}/?dl=1'


def test_cache_name_is_readable_and_keyed_by_the_whole_url(hub_dir):
    url = 'https://cloud.tsinghua.edu.cn/f/32810869fcc34410966b/?dl=1'
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    assert cache_path(url) == str(hub_dir / 'checkpoints' / f'32810869fcc34410966b-{digest}.pth')
    assert os.path.basename(cache_path('http://h/a/model.pth')).startswith('model-')
    assert cache_path('http://h/a/model.pth') != cache_path('http://h/b/model.pth')
    assert cache_path(url) != cache_path(url.replace('dl=1', 'dl=0'))
    assert os.path.basename(cache_path('http://127.0.0.1:9/')).startswith('checkpoint-')
    odd = 'http://h/first/Inline%20Swin+T (v2).pth'    # spaces, '+' and brackets become one '_' each run; case kept
    assert os.path.basename(cache_path(odd)) == f'Inline_Swin_T_v2_-{hashlib.sha256(odd.encode()).hexdigest()[:12]}.pth'


def test_two_released_links_load_their_own_weights_once(serve, hub_dir):
    (body_t, trunk_t), (body_s, trunk_s) = released_like(0), released_like(1)
    base, log = serve({'/f/aaaa1111/?dl=1': [(200, body_t)], '/f/bbbb2222/?dl=1': [(200, body_s)]})
    assert_loaded(load_through_init_cfg(share(base, 'aaaa1111')), trunk_t)
    assert_loaded(load_through_init_cfg(share(base, 'bbbb2222')), trunk_s)
    names = [os.path.basename(cache_path(share(base, i))) for i in ('aaaa1111', 'bbbb2222')]
    assert cached(hub_dir) == sorted(names) and names[0].startswith('aaaa1111-')   # nothing partial left
    # Built again: read from the cache, no new request (the server has no response left for it anyway).
    assert_loaded(load_through_init_cfg(share(base, 'aaaa1111')), trunk_t)
    assert log == ['/f/aaaa1111/?dl=1', '/f/bbbb2222/?dl=1']


def test_same_file_name_on_two_paths_does_not_collide(serve, hub_dir):
    first, second = {'w': torch.zeros(3)}, {'w': torch.ones(3)}
    base, _ = serve({'/a/model.pth': [(200, checkpoint_bytes({'state_dict': first}))],
                     '/b/model.pth': [(200, checkpoint_bytes(second))]})
    path_a, path_b = download_checkpoint(f'{base}/a/model.pth'), download_checkpoint(f'{base}/b/model.pth')
    assert path_a != path_b and len(cached(hub_dir)) == 2
    assert torch.equal(load_checkpoint_file(f'{base}/a/model.pth')['state_dict']['w'], first['w'])
    assert torch.equal(load_checkpoint_file(f'{base}/b/model.pth')['w'], second['w'])


@pytest.mark.parametrize('kind', ['truncated', 'html', 'html, no doctype', 'html after a preamble',
                                  'html, tag past 512 bytes', 'not_a_state_dict', 'empty state dict', 'code'])
def test_broken_download_fails_loudly_and_is_not_kept(serve, hub_dir, tmp_path, kind):
    body, _ = released_like(0)

    class Payload:
        def __reduce__(self):
            return (os.system, (f'touch {tmp_path / "pwned"}',))

    response = {'truncated': (200, body, len(body) // 2), 'html': (200, HTML),
                # an upper-case page with bytes that are not UTF-8, longer than the 200 bytes shown
                'html, no doctype': (200, b'  \n<HTML><BODY>' + b'\xff sign in ' * 30 + b'</BODY></HTML>'),
                'html after a preamble': (200, b'<?xml version="1.0"?>\n<html><body>gone</body></html>'),
                'html, tag past 512 bytes': (200, b'\n <!DOCTYPE html>\n<!--' + b' ' * 600 + b'--><html></html>'),
                'not_a_state_dict': (200, checkpoint_bytes({'epoch': 3, 'max_accuracy': 81.2})),
                'empty state dict': (200, checkpoint_bytes({'model': {}})),
                'code': (200, checkpoint_bytes({'model': {'x': Payload()}}))}[kind]
    base, _ = serve({'/f/cccc3333/?dl=1': [response]})
    url = share(base, 'cccc3333')
    with pytest.raises(CheckpointDownloadError) as err:
        load_through_init_cfg(url)
    message = str(err.value)
    assert url in message and f'({response[2] if kind == "truncated" else len(response[1])} bytes' in message
    assert cache_path(url) in message                    # where a copy fetched by hand goes
    shown = f', looks like HTML: {response[1][:200].decode("utf-8", "replace")!r}' if kind.startswith('html') else ''
    found = re.search(re.escape(f'bytes{shown}) is not the checkpoint: ') + '(.*)' +
                      re.escape('. It was deleted, nothing was cached. '), message)
    problem = found.group(1)
    if kind == 'not_a_state_dict':
        assert problem == "checkpoint entries are not tensors: ['epoch', 'max_accuracy']; is this a model state dict?"
    elif kind == 'empty state dict':
        assert problem == 'it holds an empty state dict'
    elif kind == 'truncated':                              # said to be cut off, before anything is unpickled
        assert re.fullmatch(rf"checkpoint '.*\.partial' is cut off: the file has {len(body) // 2:,} bytes and stops "
                            r"inside its entry '.+' \(from byte [\d,]+\); the end record .* is missing\. The download "
                            r'or copy stopped part-way: fetch the file again', problem), problem
    else:                                                  # the safe loader's refusal, the temporary file named
        assert re.fullmatch(r"cannot load checkpoint '.*' safely \(weights_only=True\): \w+: .+", problem), problem
    assert_no_unsafe_advice(err)
    assert cached(hub_dir) == []
    assert not (tmp_path / 'pwned').exists()


def test_retry_after_a_bad_response_loads_the_right_weights(serve, hub_dir):
    body, trunk = released_like(2)
    base, log = serve({'/f/dddd4444/?dl=1': [(200, HTML), (200, body)]})
    with pytest.raises(CheckpointDownloadError, match='HTML'):
        load_through_init_cfg(share(base, 'dddd4444'))
    assert cached(hub_dir) == []
    assert_loaded(load_through_init_cfg(share(base, 'dddd4444')), trunk)
    assert log == ['/f/dddd4444/?dl=1'] * 2 and len(cached(hub_dir)) == 1


def test_sha256_from_init_cfg_is_checked(serve, hub_dir):
    body, trunk = released_like(3)
    good = hashlib.sha256(body).hexdigest()
    base, _ = serve({'/f/eeee5555/?dl=1': [(200, body), (200, body)]})
    with pytest.raises(CheckpointDownloadError, match=f'sha256 is {good}, the config expects {"f" * 64}'):
        load_through_init_cfg(share(base, 'eeee5555'), sha256='F' * 64)              # shown lower-case, as digests
    assert cached(hub_dir) == []
    assert_loaded(load_through_init_cfg(share(base, 'eeee5555'), sha256=good.upper()), trunk)
    url = share(base, 'eeee5555')
    with pytest.raises(ValueError, match=re.escape(f"sha256 'abc' of checkpoint {url!r} is not a SHA-256 digest (64 "
                                                   'hex digits)') + '$'):
        load_through_init_cfg(url, sha256='abc')


def test_local_file_torch_refuses_gets_no_unsafe_advice(tmp_path):
    class Payload:
        def __reduce__(self):
            return (os.system, ('true',))

    torch.save({'model': {'x': Payload()}}, tmp_path / 'evil.pth')
    refused = r'safely \(weights_only=True\): UnpicklingError: .*GLOBAL posix\.system'
    with pytest.raises(RuntimeError, match=refused) as err:
        load_through_init_cfg(str(tmp_path / 'evil.pth'))
    assert_no_unsafe_advice(err)


def test_file_url(tmp_path, hub_dir):
    body, trunk = released_like(4)
    (tmp_path / 'ckpt.pth').write_bytes(body)
    url = (tmp_path / 'ckpt.pth').as_uri()
    assert_loaded(load_through_init_cfg(url), trunk)
    assert cached(hub_dir) == [os.path.basename(cache_path(url))]


def test_unreachable_url_names_the_link_and_the_cache_path(hub_dir):
    url = 'http://127.0.0.1:9/f/ffff6666/?dl=1'    # discard port: connection refused, as offline
    with pytest.raises(ConnectionError) as err:
        load_through_init_cfg(url)
    message = str(err.value)
    assert url in message and cache_path(url) in message and 'init_cfg.checkpoint' in message
    assert re.search(re.escape(f'{url!r}: ') + r'\[Errno \d+\] Connection refused\. Without network access, fetch the '
                     'file elsewhere', message), message
    assert cached(hub_dir) == []


def test_missing_file_on_a_server_is_a_clear_error(serve, hub_dir):
    base, _ = serve({})
    with pytest.raises(ConnectionError, match='404'):
        load_through_init_cfg(share(base, 'not_there'))
    assert cached(hub_dir) == []


@pytest.mark.parametrize('status, says', [
    (400, 'Bad Request; the server refused the request'),
    (401, 'Unauthorized; access is refused: the link may be private or expired'),
    (403, 'Forbidden; access is refused: the link may be private or expired'),
    (404, 'Not Found; the link is wrong or the file was removed: check the URL'),
    (410, 'Gone; the link is wrong or the file was removed: check the URL'),
    (500, 'Internal Server Error; the server failed: try again later'),
    (503, 'Service Unavailable; the server failed: try again later')])
def test_http_errors_say_what_went_wrong(serve, hub_dir, status, says):
    base, _ = serve({'/f/hhhh8888/?dl=1': [(status, b'<!DOCTYPE html><html>no</html>')]})
    url = share(base, 'hhhh8888')
    with pytest.raises(ConnectionError) as err:
        load_through_init_cfg(url)
    message = str(err.value)
    assert message.startswith(f'cannot download checkpoint {url!r}: the server answered HTTP {status} {says}, or '
                              f'fetch the file elsewhere and either put it at {cache_path(url)!r} or use its local '
                              'path ('), message
    assert 'Without network access' not in message                 # a wrong link is not an offline machine
    assert cached(hub_dir) == []


def test_a_timeout_is_a_stall_and_a_reset_says_what_happened():
    """urllib wraps a connect timeout in URLError (reason TimeoutError); a read that stalls raises TimeoutError
    itself: both are a stall. Other network errors are shown as they are."""
    import urllib.error

    from inline_backbones.checkpoints.loading import DOWNLOAD_TIMEOUT, _download_error

    for err in (urllib.error.URLError(TimeoutError('timed out')), TimeoutError('timed out')):
        message = str(_download_error('http://host/f', err, '/cache/f.pth', 'HINT'))
        assert message == (f"cannot download checkpoint 'http://host/f': no data for {DOWNLOAD_TIMEOUT:g} s (a "
                           'firewall or proxy that drops the connection?); nothing was cached. Retry, allow more time '
                           'with INLINE_DOWNLOAD_TIMEOUT=SECONDS, or fetch the file elsewhere and either put it at '
                           "'/cache/f.pth' or use its local path (HINT)")
    reset = _download_error('http://host/f', ConnectionResetError(104, 'Connection reset by peer'), '/c.pth', 'HINT')
    assert str(reset) == ("cannot download checkpoint 'http://host/f': [Errno 104] Connection reset by peer. Without "
                          "network access, fetch the file elsewhere and either put it at '/c.pth' or use its local "
                          'path (HINT)')


def test_a_stalled_download_times_out_with_the_link(hub_dir, monkeypatch):
    """A server that accepts the connection and never answers (as behind a firewall that drops packets)."""
    from inline_backbones.checkpoints import loading as checkpoint

    monkeypatch.setattr(checkpoint, 'DOWNLOAD_TIMEOUT', 0.5)
    silent = socket.socket()
    silent.bind(('127.0.0.1', 0))
    silent.listen(1)                                # connections queue; nothing is ever sent
    url = f'http://127.0.0.1:{silent.getsockname()[1]}/f/iiii9999/?dl=1'
    try:
        start = time.monotonic()
        with pytest.raises(ConnectionError, match=r'no data for 0.5 s .*INLINE_DOWNLOAD_TIMEOUT') as err:
            load_through_init_cfg(url)
        assert time.monotonic() - start < 10 and url in str(err.value)
    finally:
        silent.close()
    assert cached(hub_dir) == []


def test_sha256_of_a_local_file_is_checked(tmp_path):
    body, trunk = released_like(5)
    (tmp_path / 'ckpt.pth').write_bytes(body)
    path = str(tmp_path / 'ckpt.pth')
    digest = hashlib.sha256(body).hexdigest()
    with pytest.raises(ValueError, match=re.escape(f'checkpoint {path!r} has sha256 {digest}, the config expects '
                                                   f'{"a" * 64}: a different or damaged file') + '$'):
        load_through_init_cfg(path, sha256='A' * 64)                          # shown as digests are: lower case
    with pytest.raises(ValueError, match=re.escape(f"sha256 'xyz' of checkpoint {path!r} is not a SHA-256 digest")):
        load_through_init_cfg(path, sha256='xyz')
    assert_loaded(load_through_init_cfg(path, sha256=digest), trunk)


def test_timm_pretrained_true_downloads_verified_into_the_hub_cache(serve, hub_dir):
    """timm's pretrained=True takes the package's download (hash-named file in torch's hub cache, kept only if it
    loads safely) and loads the released-format file strictly."""
    import timm
    from released_fixtures import mini_arch

    torch.manual_seed(6)
    source = timm.create_model('inline_swin_tiny', **mini_arch('IIIS'), attn_type='IIIS')
    state = {k: v for k, v in source.state_dict().items() if not k.endswith('relative_position_index')}
    base, log = serve({'/f/jjjj0000/?dl=1': [(200, checkpoint_bytes({'model': state}))]})
    url = share(base, 'jjjj0000')
    # the link as timm may hold it: the overlay's url, a (url, file name) pair, the user's own pretrained_cfg;
    # the second and later ones read the cache
    for where in (dict(pretrained_cfg_overlay=dict(url=url)), dict(pretrained_cfg_overlay=dict(url=(url, 'x.pth'))),
                  dict(pretrained_cfg=dict(url=url, num_classes=1000))):
        model = timm.create_model('inline_swin_tiny', pretrained=True, **where, **mini_arch('IIIS'), attn_type='IIIS')
        assert_loaded(model, state)
    assert log == ['/f/jjjj0000/?dl=1'] and cached(hub_dir) == [os.path.basename(cache_path(url))]
