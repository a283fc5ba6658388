"""The processes of a scale-out load run (scripts/load_scale.py): redis-server, engine workers and web processes
on free loopback ports, one log file each, started together, waited for until ready, stopped together (children
die with this script); and a thread sampling each one's memory. Knows process management, nothing of Socket.IO."""
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
from tests.kit.server import get_health, log_tail, free_port  # noqa: E402  (also sets engineio's max_decode_packets)

READY_TIMEOUT_S = 180


class ScaleError(RuntimeError):
    """The processes could not be started (or one died while starting); the message carries the log tails."""


# -------------------------------------------------------------------------------------------------- processes

def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM should this script die without cleaning up (Linux; elsewhere nothing)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Processes:
    """The processes one load run started: each with its name, Popen and log file; `stop()` ends them all."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.died: dict[str, int] = {}  # name -> exit code, for a process found dead before stop()

    def start(self, name: str, cmd: list[str], env: dict | None = None) -> subprocess.Popen:
        with open(self.log_dir / f"{name}.log", "wb") as log:
            log.write((" ".join(cmd) + "\n").encode())
            log.flush()
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1", "OMP_WAIT_POLICY": "PASSIVE",
                                         **(env or {})},
                                    start_new_session=True, preexec_fn=_die_with_parent)
        self.procs[name] = proc
        return proc

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None and name not in self.died:
                self.died[name] = proc.returncode

    def tails(self, names=None, lines: int = 25) -> str:
        return "\n".join(f"--- {self.log_path(n)} (last {lines} lines)\n{log_tail(self.log_path(n), lines)}"
                         for n in (names or self.procs))

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM the webs and engine workers, then (once they are gone: they say goodbye to it) redis; SIGKILL
        whatever is left of a stage after `timeout` seconds, and anything a process left in its group."""
        for stage in ([n for n in self.procs if n != "redis"], [n for n in self.procs if n == "redis"]):
            for name in stage:
                self._signal(self.procs[name], signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for name in stage:
                proc = self.procs[name]
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self._signal(proc, signal.SIGKILL)
                    proc.wait()
        for proc in self.procs.values():  # its pid is its group's id (start_new_session)
            self._signal(proc, signal.SIGKILL)

    @staticmethod
    def _signal(proc: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def start_processes(procs: Processes, *, webs: int, workers: int, single: bool, real: bool, eventlet: bool,
                    data_dir: Path, python: str, ready_timeout_s: float, pace: float = 1.0,
                    persist: bool = True) -> dict:
    """Start redis (`persist`: with an append-only file, fsync always, as `make scale`), the engine workers and the
    webs (or the one single-process server); wait until all are ready. Returns {"urls": [...], "redis_url": str |
    None, "redis_cmd": [...] | None}."""
    web_mode = ["--async-mode", "eventlet"] if eventlet else []
    sim = [] if real else ["--backend", "sim", "--pace", f"{pace:g}"]
    urls, redis_url, redis_cmd = [], None, None
    if single:
        port = free_port()
        procs.start("web1", [python, "-m", "app", *sim, "--port", str(port), "--data", str(data_dir), *web_mode])
        urls.append(f"http://127.0.0.1:{port}")
    else:
        redis = shutil.which("redis-server")
        if redis is None:
            raise ScaleError("redis-server is not installed; run scripts/need_redis.sh, or: "
                             "sudo apt-get install -y redis-server")
        redis_port = free_port()
        redis_cmd = [redis, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--dir", str(procs.log_dir),
                     *(["--appendonly", "yes", "--appendfsync", "always"] if persist else ["--appendonly", "no"])]
        procs.start("redis", redis_cmd)
        _wait(lambda: _redis_ping(redis_port), procs, 20, "redis-server did not answer PING")
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        for i in range(1, workers + 1):
            procs.start(f"worker{i}", [python, "-m", "app.engine_worker", "--message-queue", redis_url, *sim,
                                       "--data", str(data_dir)])
        for i in range(1, webs + 1):
            port = free_port()
            procs.start(f"web{i}", [python, "-m", "app", "--message-queue", redis_url, "--port", str(port),
                                    "--data", str(data_dir), *web_mode])
            urls.append(f"http://127.0.0.1:{port}")
    health: dict[str, dict | None] = {}

    def all_ready() -> bool:
        for url in urls:
            if not (health.get(url) or {}).get("ready"):
                health[url] = get_health(url)
        return all((health.get(u) or {}).get("ready") for u in urls)
    _wait(all_ready, procs, ready_timeout_s,
          lambda: f"not every web process was ready; last /healthz answers: {json.dumps(health)}")
    return {"urls": urls, "redis_url": redis_url, "redis_cmd": redis_cmd}


def kill_redis(procs: Processes) -> None:
    """Kill redis-server (-9) and wait until it is gone (`start_redis_again` brings it back)."""
    procs.procs["redis"].kill()
    procs.procs["redis"].wait()


def start_redis_again(procs: Processes, redis_cmd: list[str]) -> None:
    """Start redis-server with its first command (the same data, if it had persistence); back once it answers PING.
    Call it on the thread that started the rest: a child dies with the thread that started it (_die_with_parent)."""
    procs.start("redis", redis_cmd)
    port = int(redis_cmd[redis_cmd.index("--port") + 1])
    _wait(lambda: _redis_ping(port), procs, 20, "redis-server did not answer PING after its restart")


def _wait(ok, procs: Processes, timeout: float, what) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        procs.check_alive()
        if procs.died:
            raise ScaleError(f"exited while starting: {procs.died}\n{procs.tails(list(procs.died))}")
        if time.monotonic() > deadline:
            raise ScaleError(f"{what() if callable(what) else what} after {timeout:.0f} s\n{procs.tails()}")
        time.sleep(0.25)


class RssSampler(threading.Thread):
    """Peak RSS (MiB) of each named process (with its descendants), and of this script itself, every 0.25 s."""

    def __init__(self, procs: dict[str, subprocess.Popen]):
        super().__init__(daemon=True)
        self.targets = {name: psutil.Process(p.pid) for name, p in procs.items() if p.poll() is None}
        self.targets["load_client"] = psutil.Process()
        self.peak = {name: 0 for name in self.targets}
        self.halt = threading.Event()

    def sample(self) -> None:
        for name, proc in self.targets.items():
            try:
                family = [proc] + (proc.children(recursive=True) if name != "load_client" else [])
                rss = sum(p.memory_info().rss for p in family)
            except psutil.Error:
                continue
            self.peak[name] = max(self.peak[name], rss)

    def run(self) -> None:
        while not self.halt.wait(0.25):
            self.sample()

    def stop(self) -> dict[str, float]:
        self.halt.set()
        self.join(5)
        self.sample()
        return {name: round(v / 2 ** 20, 1) for name, v in self.peak.items()}


# -------------------------------------------------------------------------------------------------- clients
