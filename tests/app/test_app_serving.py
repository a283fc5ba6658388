"""The HTTP server's own manners (issue 22): a connection that sends nothing is closed after the idle timeout
instead of holding a thread for ever, and the `Server` header names no server or Python version."""
import socket
import threading
import time
import urllib.request

import pytest
from werkzeug.serving import make_server

from app.asyncmode import IDLE_TIMEOUT_S, SERVER_NAME, serve_options
from engine import Engine


@pytest.fixture
def served(make_app):
    handler = serve_options("threading")["request_handler"]
    handler.timeout = 0.5                     # the same handler, a test-sized timeout (IDLE_TIMEOUT_S in service)
    server = make_server("127.0.0.1", 0, make_app(engine=Engine(None)), threaded=True, request_handler=handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_port
    server.shutdown()


def test_the_server_header_names_no_versions(served):
    with urllib.request.urlopen(f"http://127.0.0.1:{served}/healthz", timeout=10) as r:
        assert r.headers["Server"] == SERVER_NAME
    assert "Werkzeug" not in SERVER_NAME and "Python" not in SERVER_NAME


def test_a_silent_connection_is_closed_after_the_idle_timeout(served):
    assert IDLE_TIMEOUT_S > 25 + 20           # longer than engine.io's ping interval plus its timeout
    with socket.create_connection(("127.0.0.1", served), timeout=10) as half_open:
        t0 = time.monotonic()
        half_open.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")   # and never the blank line
        assert half_open.recv(1024) == b""      # closed by the server, not by our 10 s timeout
        assert time.monotonic() - t0 < 5


def test_eventlet_mode_gets_the_same_timeout():
    assert serve_options("eventlet") == {"socket_timeout": IDLE_TIMEOUT_S}
