"""The vLLM bridge's process, seen from Batch Lanes: find the vLLM virtualenv, start `engine/peers/vllm_bridge.py` in it,
and talk JSON lines to it. One bridge per engine-argument set is kept warm between runs (vLLM takes ~60 s to start
on a 2-core CPU), reset between them; a bridge that died is started again by the next run.

It knows nothing of step records (engine/peers/vllm_lane.py) and imports no vLLM: vLLM lives in its own virtualenv
(`make vllm`), because it pins another transformers than ours.
"""
import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = Path(__file__).with_name("vllm_bridge.py")
INSTALL_HINT = "run `make vllm` to install it (a second virtualenv, .venv-vllm: ~3 minutes, ~2 GB)"


class VllmError(RuntimeError):
    """The vLLM lane cannot go on: not installed, failed to start, or its process died (the message says which)."""


def vllm_python() -> Path:
    """The vLLM virtualenv's python: $BATCH_LANES_VLLM_PYTHON, else .venv-vllm in the repository."""
    return Path(os.environ.get("BATCH_LANES_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))


def vllm_available() -> bool:
    """Whether the vLLM lane can run here (its virtualenv exists): the page offers it only then."""
    return vllm_python().is_file()


def split_env(engine_args: dict) -> dict:
    """The variables a vLLM engine split over worker processes (tensor or pipeline parallel) starts with: one core
    per worker, in turn over this process's cores (VLLM_CPU_OMP_THREADS_BIND "0|1|0": vLLM-CPU's per-rank binding;
    more workers than cores share them), and 1 GiB of KV cache per worker instead of 2. Nothing for one process."""
    world = engine_args.get("tensor_parallel_size", 1) * engine_args.get("pipeline_parallel_size", 1)
    if world == 1:
        return {}
    cores = sorted(os.sched_getaffinity(0))
    return {"VLLM_CPU_OMP_THREADS_BIND": "|".join(str(cores[i % len(cores)]) for i in range(world)),
            "VLLM_CPU_KVCACHE_SPACE": "1"}


class BridgeProcess:
    """One bridge process: `call(msg)` sends a JSON line and returns its answer, or raises VllmError."""

    def __init__(self, model: str, engine_args: dict, env: dict | None = None):
        """`env`: variables this process gets beside ours (a P/D pair's engines take 1 GiB of KV each)."""
        if not vllm_available():
            raise VllmError(f"the vLLM lane needs vLLM, which is not installed here: {INSTALL_HINT}")
        self.log = tempfile.NamedTemporaryFile("w+", prefix="vllm-bridge-", suffix=".log", delete=False)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **split_env(engine_args), **(env or {})}
        env.pop("PYTHONPATH", None)  # the bridge imports vLLM's packages only, never our engine
        self.proc = subprocess.Popen([str(vllm_python()), str(BRIDGE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env, cwd=str(ROOT))
        self.lock = threading.Lock()
        self.info = self.call({"op": "start", "model": model, "engine_args": engine_args}, "starting")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, msg: dict, doing: str = "stepping") -> dict:
        with self.lock:
            try:
                self.proc.stdin.write(json.dumps(msg) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
            except (BrokenPipeError, OSError, ValueError):
                line = ""
        if not line:
            self.proc.wait(timeout=10)
            raise VllmError(f"the vLLM process exited (code {self.proc.returncode}) while {doing}: {self.last_log()}")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise VllmError(f"vLLM failed while {doing}: {answer.get('error')}")
        return answer

    def last_log(self) -> str:
        """The last line vLLM wrote to its log, for the error a person reads."""
        try:
            lines = [s for s in Path(self.log.name).read_text(errors="replace").splitlines() if s.strip()]
        except OSError:
            return "(no log)"
        return lines[-1][-300:] if lines else "(no output)"

    def close(self) -> None:
        if self.alive:
            try:
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


_WARM: dict[str, BridgeProcess] = {}   # engine arguments (JSON) -> a bridge no run is using
_LOCK = threading.Lock()


def acquire(model: str, engine_args: dict) -> BridgeProcess:
    """A started bridge for these arguments: a warm one (its prefix cache reset), else a new one (~60 s). Bridges for
    other arguments are closed first: one vLLM at a time holds this machine's memory."""
    key = json.dumps([model, engine_args], sort_keys=True)
    with _LOCK:
        warm = _WARM.pop(key, None)
        for other in list(_WARM):
            _WARM.pop(other).close()
    if warm is not None and warm.alive:
        try:
            warm.call({"op": "reset"}, "resetting")
            return warm
        except VllmError:
            warm.close()
    return BridgeProcess(model, engine_args)


def release(bridge: BridgeProcess, engine_args: dict, model: str) -> None:
    """Give a bridge back once its run ended with every request finished, to be reused; else close it."""
    key = json.dumps([model, engine_args], sort_keys=True)
    if not bridge.alive:
        return
    with _LOCK:
        old = _WARM.pop(key, None)
        _WARM[key] = bridge
    if old is not None:
        old.close()


def close_all() -> None:
    with _LOCK:
        bridges = [_WARM.pop(k) for k in list(_WARM)]
    for b in bridges:
        b.close()


atexit.register(close_all)
