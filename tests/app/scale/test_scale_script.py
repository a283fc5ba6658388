"""`scripts/scale.sh` (`make scale`) keeps serving when one of its processes dies: on the simulator, with two web
processes and two engine workers, the engine worker serving a streamed request is killed (-9); the stream ends
with an error, `/metrics` counts the lost request, `/v1` still answers on both web processes (the simulator's
same words for the same prompt), the script prints which process exited, with what code, and (RESTART=yes)
starts it again; SIGTERM stops every process it started."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
import requests
from prometheus_client.parser import text_string_to_metric_families

from app.live.remote import INFLIGHT
from tests.kit.scale import redis_server_binary
from tests.kit.server import ROOT, free_port, log_tail

pytestmark = pytest.mark.redis
LONG = {"model": "simulator", "messages": [{"role": "user", "content": "Count slowly."}], "max_tokens": 250,
        "ignore_eos": True, "stream": True}   # ~16 s at pace 1: still running when its worker is killed
SHORT = {"model": "simulator", "prompt": "Name three fruits.", "max_tokens": 6, "ignore_eos": True}


def wait_until(check, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} not reached in {timeout} s"
        time.sleep(0.05)
    return value


class Script:
    """scripts/scale.sh running in its own session, its output lines collected on a thread."""

    def __init__(self, folder: Path, **env: str):
        redis_server_binary()   # skips (or fails under make test) without redis-server
        self.logs, self.ports, self.redis_port = folder / "logs", [free_port(), free_port()], free_port()
        self.proc = subprocess.Popen(
            ["bash", "scripts/scale.sh"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
            env={**os.environ, "PY": sys.executable, "BACKEND": "sim", "PACE": "1", "WORKERS": "2",
                 "PORTS": " ".join(map(str, self.ports)), "REDIS_PORT": str(self.redis_port),
                 "DATA": str(folder / "data"), "LOG_DIR": str(self.logs), "READY_TIMEOUT_S": "60", **env})
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self.reader.start()

    def said(self, text: str) -> str | None:
        return next((line for line in list(self.lines) if text in line), None)

    def pid(self, name: str) -> int:
        return int((self.logs / f"{name}.pid").read_text())

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def why(self) -> str:
        return "".join(self.lines) + "\n".join(f"== {p.name}\n{log_tail(p, 10)}" for p in sorted(self.logs.glob("*.log")))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:   # never expected: leave nothing behind all the same
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        self.reader.join(timeout=10)   # its last lines may still be in the pipe when it has exited
        return code


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def errors_counted(url: str) -> dict[str, float]:
    """request_success_total{finished_reason="error"} on a web process's /metrics, by engine."""
    text = requests.get(url + "/metrics", timeout=10).text
    return {s.labels["engine"]: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name.endswith("request_success_total") and s.labels.get("finished_reason") == "error"}


def test_a_killed_engine_worker_is_reported_restarted_and_the_deployment_keeps_serving(tmp_path):
    script = Script(tmp_path, RESTART="yes", RESTART_MAX="1")
    try:
        wait_until(lambda: script.said("Ctrl-C stops them all") or script.proc.poll() is not None, "ready", 60)
        assert script.proc.poll() is None, script.why()
        stream = requests.post(script.url(0) + "/v1/chat/completions", json=LONG, stream=True, timeout=60)
        lines = stream.iter_lines(decode_unicode=True)
        assert next(line for line in lines if line.startswith("data: "))   # its first token was written
        r = redis.Redis(port=script.redis_port, decode_responses=True)
        busy = wait_until(lambda: [w for w, n in r.hgetall(INFLIGHT).items() if int(n) > 0], "a worker in flight")
        pid = int(busy[0].rsplit("-", 1)[1])
        name = next(n for n in ("worker1", "worker2") if script.pid(n) == pid)
        os.kill(pid, signal.SIGKILL)

        rest = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]   # until the stream ends
        assert rest[-1]["error"]["code"] == "engine_error", rest[-1]
        answers = [requests.post(script.url(i) + "/v1/completions", json=SHORT, timeout=30) for i in (0, 1)]
        assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
        texts = [a.json()["choices"][0]["text"] for a in answers]
        assert texts[0] == texts[1] and len(texts[0].split()) == 6   # the simulator's words, the same for one prompt
        assert errors_counted(script.url(1)).get(f"worker-{socket.gethostname()}-{pid}") == 1.0

        report = script.said(f"{name} (pid {pid}) exited with code 137 (killed by SIGKILL)")
        assert report and script.said(f"{name} restarts in 1 s (restart 1 of at most 1)"), script.why()
        restarted = wait_until(lambda: script.said(f"{name} restarted (pid"), "the restart", 10)
        assert script.pid(name) != pid and alive(script.pid(name)), restarted
        wait_until(lambda: requests.get(script.url(1) + "/healthz", timeout=5).json().get("workers") == 2,
                   "two engine workers again", 20)
        os.kill(script.pid(name), signal.SIGKILL)   # RESTART_MAX=1: the second exit is only reported
        wait_until(lambda: script.said(f"{name} is not restarted: restarted 1 times already"), "the refusal", 10)
        assert requests.post(script.url(0) + "/v1/completions", json=SHORT, timeout=30).status_code == 200
    finally:
        pids = [int(p.read_text()) for p in script.logs.glob("*.pid")]
        code = script.stop()
    assert code == 130 and script.said("stopped; logs in"), script.why()
    assert not [p for p in pids if alive(p)], "a process outlived the script"
