"""A scale-out deployment on loopback for the integration tests: a real `redis-server` on a free port, engine
workers (`python -m app.engine_worker`) and web processes (`python -m app --message-queue ...`), one data
folder, every process's output in its own log file.

    with deployment(tmp_path, webs=2, workers=2) as d:
        a, b = d.client(0), d.client(1)          # EventClients on web 0 and web 1

This module knows how to start, stop and kill the processes and where their logs are, nothing of the protocol
beyond `GET /healthz`.
"""
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from tests.kit.server import ROOT, EventClient, get_health, log_tail, free_port

SIM = ("--backend", "sim", "--pace", "1")  # the simulator, each step taking its simulated time (60 ms and up)


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        if os.environ.get("BATCH_LANES_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is not installed: sudo apt-get install -y redis-server (make test does it)")
        pytest.skip("redis-server is not installed (make test installs it)")
    return found


class Deployment:
    def __init__(self, folder: Path, persist: bool = False):
        self.folder = folder
        self.persist = persist   # Redis with an append-only file (fsync always): its data survives a restart
        self.data = folder / "data"
        self.redis_port = free_port()
        self.url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.redis_proc: subprocess.Popen | None = None
        self.webs: list[tuple[str, subprocess.Popen]] = []   # (base URL, process)
        self.workers: list[subprocess.Popen] = []
        self.clients: list[EventClient] = []

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")
        return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def start_redis(self) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.folder)] if self.persist \
            else ["--appendonly", "no"]
        self.redis_proc = self._spawn("redis", [redis_server_binary(), "--port", str(self.redis_port), "--bind",
                                                "127.0.0.1", "--save", "", *persistence])
        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis(port=self.redis_port).ping()
                return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, log_tail(self.folder / "redis.log")
                time.sleep(0.05)

    def restart_redis(self, down_s: float) -> None:
        """Kill Redis (-9), leave it down `down_s` seconds, start it again on the same port (empty unless `persist`)."""
        self.redis_proc.kill()
        self.redis_proc.wait()
        time.sleep(down_s)
        self.start_redis()

    def start_worker(self, *args: str) -> subprocess.Popen:
        proc = self._spawn(f"worker{len(self.workers)}", [sys.executable, "-m", "app.engine_worker", "--message-queue",
                                                          self.url, "--data", str(self.data), *args])
        self.workers.append(proc)
        return proc

    def start_web(self, *args: str) -> str:
        port = free_port()
        proc = self._spawn(f"web{len(self.webs)}", [sys.executable, "-m", "app", "--message-queue", self.url, "--port",
                                                    str(port), "--data", str(self.data), *args])
        url = f"http://127.0.0.1:{port}"
        self.webs.append((url, proc))
        return url

    def wait_ready(self, workers: int, timeout: float = 180) -> None:
        """Until every web process answers /healthz with `workers` ready engine workers."""
        deadline = time.monotonic() + timeout
        for i, (url, proc) in enumerate(self.webs):
            while True:
                health = get_health(url)
                if health and health.get("ready") and health.get("workers") == workers:
                    break
                assert proc.poll() is None, f"web {i} exited:\n{self.logs()}"
                assert time.monotonic() < deadline, f"web {i} not ready: {health}\n{self.logs()}"
                time.sleep(0.2)

    def client(self, web: int, **kwargs) -> EventClient:
        c = EventClient(self.webs[web][0], **kwargs)
        self.clients.append(c)
        return c

    def redis(self) -> redis.Redis:
        return redis.Redis(port=self.redis_port, decode_responses=True)

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{log_tail(p, 15)}" for p in sorted(self.folder.glob("*.log")))

    def stop(self) -> None:
        for c in self.clients:
            if c.sio.connected:
                c.close()
        procs = [p for _, p in self.webs] + self.workers + ([self.redis_proc] if self.redis_proc else [])
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def deployment(folder: Path, webs: int = 2, workers: int = 2, worker_args: tuple = SIM, web_args: tuple = (),
               persist: bool = False):
    d = Deployment(folder, persist)
    try:
        d.start_redis()
        for _ in range(workers):
            d.start_worker(*worker_args)
        for i in range(webs):
            d.start_web(*(web_args[i] if web_args and isinstance(web_args[0], tuple) else web_args))
        d.wait_ready(workers)
        yield d
    finally:
        d.stop()


def ticks(client: EventClient, run_id: str) -> list[int]:
    """The `t` of every tick `client` got for `run_id`, sorted (handlers may run out of order: check sets)."""
    return sorted(t["t"] for t in client.named("tick", run_id))
