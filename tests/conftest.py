"""The suite's hooks and fixtures (pytest reads this file; test modules do not import it: what they share as code is
in the helper modules beside it, e.g. ``helpers.py``, ``reference_attention.py``, ``padding_cases.py``)."""
import http.server
import importlib.util
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from openmmlab_marker import cannot_import_without_openmmlab, item_touches_openmmlab

# As inline_backbones.frameworks.openmmlab_installed() decides; not imported from there: importing the package
# imports timm, which imports Triton, and TRITON_INTERPRET below must be set before Triton is imported.
OPENMMLAB_INSTALLED = importlib.util.find_spec('mmengine') is not None
NO_LINE = 'no OpenMMLab line is installed (a timm/transformers environment): the test touches OpenMMLab'
_left_out = []
MAX_REQUESTS = 8      # per test server (``serve``): every test makes fewer
SERVE_SECONDS = 60    # a test server stops by itself after this long

pytest_plugins = ['time_budget']   # the run's and each test's time against their budgets (tests/time_budget.py)

if not torch.cuda.is_available():   # the Triton kernels run on the CPU under Triton's interpreter (set before any
    os.environ.setdefault('TRITON_INTERPRET', '1')   # kernel is compiled: mixers/inline/paths.py imports them lazily)


def pytest_ignore_collect(collection_path, config):
    """Without an OpenMMLab line, the test modules that cannot be imported without one are not collected; the summary
    lists them."""
    path = Path(collection_path)
    if OPENMMLAB_INSTALLED or path.suffix != '.py' or not path.name.startswith('test_'):
        return None
    if cannot_import_without_openmmlab(path.resolve()):
        _left_out.append(path.name)
        return True
    return None


def pytest_report_header(config):
    if not OPENMMLAB_INSTALLED:
        return [f'{NO_LINE.split(":")[0]}: the tests marked openmmlab are skipped, and the modules that import it are '
                'not collected (listed at the end)']
    return None


def pytest_terminal_summary(terminalreporter):
    if _left_out:
        terminalreporter.write_line(f'not collected without an OpenMMLab line ({len(_left_out)} modules): '
                                    + ' '.join(sorted(_left_out)))


def pytest_collection_modifyitems(items):
    """Marks ``openmmlab`` every test that touches OpenMMLab (the rule: openmmlab_marker.py); without a line
    installed, those tests are skipped."""
    skip = pytest.mark.skip(reason=NO_LINE)
    for item in items:
        if getattr(item, 'module', None) is None:
            continue
        if item_touches_openmmlab(item):
            item.add_marker(pytest.mark.openmmlab)
            if not OPENMMLAB_INSTALLED:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _default_scope_is_not_inherited():
    """mmengine's current default scope is the last ``DefaultScope`` created (a Runner creates one, e.g. ``mmseg``)
    and stays for the whole process: a test that runs a Runner in-process would switch every later unscoped
    ``MODELS.build`` to that task's registry. Each test ends with the scopes it started with (nothing to do where
    mmengine was not imported)."""
    if sys.modules.get('mmengine') is None:
        yield
        return
    from mmengine.registry import DefaultScope

    before = dict(DefaultScope._instance_dict)
    yield
    DefaultScope._instance_dict.clear()
    DefaultScope._instance_dict.update(before)


@pytest.fixture
def no_grad():
    """The test runs under ``torch.no_grad()`` (a module asks for it in every test with
    ``pytestmark = pytest.mark.usefixtures('no_grad')``)."""
    with torch.no_grad():
        yield


@pytest.fixture
def serve():
    """``serve(routes)`` starts an HTTP server on 127.0.0.1 (free port) and returns (base URL, request log).

    ``routes`` maps a request path (query included) to the responses for its successive requests, each
    ``(status, body)`` or ``(status, body, bytes_sent)``: ``Content-Length`` announces the whole body, only
    ``bytes_sent`` of it are sent (a truncated download). Unknown paths, and paths whose responses are used
    up, get a 404. The server stops by itself after MAX_REQUESTS requests or SERVE_SECONDS, and at the end
    of the test; clients time out after 10 s (torch's download sets no timeout of its own).
    """
    started = []
    default_timeout = socket.getdefaulttimeout()
    socket.setdefaulttimeout(10)

    def start(routes):
        log = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                log.append(self.path)
                if not routes.get(self.path):
                    self.send_error(404)
                    return
                status, body, *sent = routes[self.path].pop(0)
                self.send_response(status)
                self.send_header('Content-Type', 'text/html' if body.startswith(b'<!') else 'application/octet-stream')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body[:sent[0]] if sent else body)

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(('127.0.0.1', 0), Handler)
        server.timeout = 0.1
        stop = threading.Event()
        deadline = time.monotonic() + SERVE_SECONDS

        def loop():
            while not stop.is_set() and len(log) < MAX_REQUESTS and time.monotonic() < deadline:
                server.handle_request()
            server.server_close()

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        started.append((stop, thread))
        return f'http://127.0.0.1:{server.server_address[1]}', log

    yield start
    socket.setdefaulttimeout(default_timeout)
    for stop, thread in started:
        stop.set()
        thread.join(timeout=5)
