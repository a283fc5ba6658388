"""Start `python -m app` as a subprocess on a free port and wait until it is ready: for end-to-end tests,
browser tests and the load script.

    with live_server("--async-mode", "eventlet", data_dir=tmp_path) as url:
        requests.get(f"{url}/healthz")

The yielded URL is a `str` that also carries `.process` (the Popen) and `.log_path` (the server's
stdout and stderr, one file). `EventClient` is a python-socketio client that records every event it
gets and can wait for one. This module knows how to start, stop and reach the server, nothing of its
protocol beyond `GET /healthz` and event names.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import engineio.payload
import socketio

# python-engineio refuses a long-polling response of more than 16 packets (a guard meant for servers);
# a finished run's replay or a burst of ticks to a slow poller is longer. Browsers have no such limit.
engineio.payload.Payload.max_decode_packets = 10_000

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 180


class LiveServer(str):
    """The base URL, plus the server process and its log file."""
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def get_health(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # 503 while the model failed to load still carries the JSON
        return json.loads(e.read() or b"{}")
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None


@contextmanager
def live_server(*args: str, env: dict | None = None, data_dir: str | os.PathLike | None = None,
                timeout: float = READY_TIMEOUT_S):
    """Run `python -m app --port PORT *args` (cwd: the repo root) until the block ends; yield its base URL."""
    with tempfile.TemporaryDirectory(prefix="batch-lanes-live-") as tmp:
        port = free_port()
        cmd = [sys.executable, "-m", "app", "--port", str(port), "--data", str(data_dir or Path(tmp) / "data"), *args]
        log_path = Path(tmp) / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        url = LiveServer(f"http://127.0.0.1:{port}")
        url.process, url.log_path = proc, log_path
        try:
            deadline, health = time.monotonic() + timeout, None
            while not (health and health.get("ready")):
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited with code {proc.returncode} before it was ready:\n"
                                       f"{log_tail(log_path)}")
                if health and health.get("status") == "error":
                    raise RuntimeError(f"server failed to load its model: {health}\n{log_tail(log_path)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server not ready after {timeout:.0f} s:\n{log_tail(log_path)}")
                time.sleep(0.2)
                health = get_health(url)
            try:
                yield url
            except BaseException as e:  # a test that failed against the server: its log's tail says what it did
                e.add_note(f"the server's log, last 40 lines:\n{log_tail(log_path)}")
                raise
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class EventClient:
    """A python-socketio client that records (name, payload) of every event, in order of arrival, and
    when each arrived (`arrived_at`, wall-clock seconds, to compare with a tick's `sent_at`)."""
    EVENTS = ("model_status", "run_queued", "run_started", "tick", "run_finished", "run_error", "sweep_started",
              "sweep_progress", "sweep_point", "sweep_finished")

    def __init__(self, url: str, **connect_kwargs):
        self.events: list[tuple[str, dict]] = []
        self.arrived_at: list[float] = []
        self.changed = threading.Condition()
        self.sio = socketio.Client(reconnection=False)
        for name in self.EVENTS:
            self.sio.on(name, lambda payload, name=name: self._got(name, payload))
        self.sio.connect(url, **connect_kwargs)

    def _got(self, name: str, payload) -> None:
        with self.changed:
            self.events.append((name, payload))
            self.arrived_at.append(time.time())
            self.changed.notify_all()

    def emit(self, event: str, payload) -> None:
        self.sio.emit(event, payload)

    def named(self, name: str, run_id: str | None = None) -> list:
        with self.changed:
            return [p for n, p in self.events if n == name and (run_id is None or p.get("run_id") == run_id)]

    def wait_for(self, name: str, run_id: str | None = None, timeout: float = 180) -> dict:
        """The first `name` event (for `run_id`, if given); AssertionError after `timeout` seconds."""
        with self.changed:
            ok = self.changed.wait_for(lambda: any(n == name and (run_id is None or p.get("run_id") == run_id)
                                                   for n, p in self.events), timeout)
            assert ok, f"no {name} event within {timeout} s; got {[n for n, _ in self.events]}"
        return self.named(name, run_id)[0]

    def close(self) -> None:
        self.sio.disconnect()
