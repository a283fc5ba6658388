"""`make fleet`: N Batch Lanes servers, each its own engine process, behind the real vllm-router (docs/fleets.md).

    .venv/bin/python -m scripts.fleet [--replicas 2] [--policy cache_aware] [--port 8000] [--backend model|sim]

Starts `python -m app` N times on ports PORT+1 .. PORT+N (each pinned to its own share of this process's cores where
there are at least two a replica), waits for each `/health`, then starts `vllm-router` on PORT in front of them
with the chosen policy (its Prometheus metrics on PORT+100), serves the fleet view on PORT+200 (every replica's live
lane side by side on one clock and the router's counters: app/live/fleet_app.py), and runs until Ctrl-C, which stops
them all. `/v1` through the router works for any OpenAI client; each server's own page, Live view and `/metrics`
stay on its port.
The router comes from its own virtualenv (`--router-venv`, default .venv-router; `make fleet` installs
vllm-router 0.1.17 there; never `make run`). Also the helpers scripts/router_fidelity.py starts its servers with.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from app.live.fleet import FleetScrape
from app.live.fleet_app import serve

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ("round_robin", "random", "consistent_hash", "power_of_two", "cache_aware")


def get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait_for(url: str, seconds: float, proc: subprocess.Popen) -> None:
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before {url} answered")
        try:
            get(url, 2.0)
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {seconds:.0f} s")


def router_binary(venv: str) -> Path:
    binary = Path(venv) / "bin" / "vllm-router"
    if not binary.exists():
        sys.exit(f"error: no vllm-router at {binary}: `make router` installs it (vllm-router 0.1.17 into "
                 f".venv-router; `make fleet` runs it first), or python3 -m venv {venv} && "
                 f"{venv}/bin/pip install vllm-router==0.1.17")
    return binary


def core_sets(n: int, least: int = 2) -> list[list[int] | None]:
    """Each replica's own cores, where every replica can have `least` or more; else None (all share them)."""
    cores = sorted(os.sched_getaffinity(0))
    share = len(cores) // n
    return [cores[i * share:(i + 1) * share] for i in range(n)] if share >= least else [None] * n


def start_servers(n: int, first_port: int, backend: str, quiet: bool = True, least_cores: int = 2,
                  args: tuple[str, ...] = ()) -> tuple[list[str], list[subprocess.Popen]]:
    """N `python -m app *args` servers on first_port .. first_port + n - 1, each with its own run store and, where
    each can have `least_cores`, its own cores; their URLs."""
    urls, procs = [], []
    for i, cores in enumerate(core_sets(n, least_cores)):
        port = first_port + i
        cmd = [sys.executable, "-m", "app", "--backend", backend, "--port", str(port),
               "--data", tempfile.mkdtemp(prefix=f"fleet-{i}-"), *args]
        env = {**os.environ, **({"OMP_NUM_THREADS": str(len(cores))} if cores else {})}
        out = subprocess.DEVNULL if quiet else None
        procs.append(subprocess.Popen((["taskset", "-c", ",".join(map(str, cores))] if cores else []) + cmd,
                                      cwd=ROOT, env=env, stdout=out, stderr=out))
        urls.append(f"http://127.0.0.1:{port}")
    return urls, procs


def start_router(binary: Path, urls: list[str], policy: str, port: int, quiet: bool = True,
                 metrics_port: int | None = None) -> subprocess.Popen:
    """vllm-router on `port` in front of `urls`, its Prometheus metrics on `metrics_port` (default port + 100)."""
    out = subprocess.DEVNULL if quiet else None
    return subprocess.Popen([str(binary), "--worker-urls", *urls, "--policy", policy, "--port", str(port),
                             "--prometheus-port", str(metrics_port or port + 100), "--log-level", "warning"],
                            stdout=out, stderr=out)


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def watch(servers: list[subprocess.Popen], urls: list[str], router: subprocess.Popen) -> None:
    """Until the router ends: a replica that ends is said once; the router goes on with the others (its health
    checks take the dead one out) and the fleet view shows it down."""
    gone: set[int] = set()
    while router.poll() is None:
        for i, proc in enumerate(servers):
            if i not in gone and proc.poll() is not None:
                gone.add(i)
                print(f"error: replica {i + 1} ({urls[i]}) exited with code {proc.returncode}; the router goes on "
                      f"with the others", file=sys.stderr, flush=True)
        time.sleep(1)
    print(f"error: the router exited with code {router.returncode}: stopping the replicas", file=sys.stderr)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replicas", type=int, default=2, choices=range(1, 9), metavar="N")
    p.add_argument("--policy", choices=POLICIES, default="cache_aware")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--backend", choices=("model", "sim"), default="model")
    p.add_argument("--router-venv", default=str(ROOT / ".venv-router"))
    p.add_argument("--metrics-port", type=int, default=None, help="the router's Prometheus port (default PORT+100)")
    p.add_argument("--view-port", type=int, default=None, help="the fleet view's port (default PORT+200)")
    args = p.parse_args()
    binary = router_binary(args.router_venv)
    signal.signal(signal.SIGTERM, interrupted)  # a kill stops the whole fleet, as Ctrl-C does
    urls, procs = start_servers(args.replicas, args.port + 1, args.backend, quiet=False)
    view = router = None
    try:
        for url, proc in zip(urls, procs):
            wait_for(f"{url}/health", 300, proc)
        metrics_port = args.metrics_port or args.port + 100
        router = start_router(binary, urls, args.policy, args.port, quiet=False, metrics_port=metrics_port)
        wait_for(f"http://127.0.0.1:{args.port}/health", 60, router)
        router_url, metrics_url = f"http://127.0.0.1:{args.port}", f"http://127.0.0.1:{metrics_port}/metrics"
        view_port = args.view_port or args.port + 200
        view = serve(FleetScrape(urls, router_url, metrics_url, args.policy), "127.0.0.1", view_port)
        print(f"\nvllm-router ({args.policy}) on {router_url}/v1 in front of {', '.join(urls)}; its metrics on "
              f"{metrics_url}; the fleet view on http://127.0.0.1:{view_port}/. Ctrl-C stops them all.", flush=True)
        watch(procs, urls, router)
    except KeyboardInterrupt:
        pass
    finally:
        if view is not None:
            view.shutdown()
        stop(procs + [router] if router else procs)


if __name__ == "__main__":
    main()
