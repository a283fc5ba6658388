"""Benchmark section: the race, Batch Lanes' continuous lane (plain, and with the live lane's options: chunks under a
token budget, fused) beside the vLLM lane (a real vLLM V1 engine, issue 24) in one run, on one clock each, in
lockstep (never two computations at once), on the same mixes: mixed x8, 16 chat prompts with EOS, a Poisson mix at
1, 2 and 4 req/s; tokens/s, TTFT and TPOT p50/p95 from the step records; then Batch Lanes' live endpoint against
vLLM's OpenAI server under scripts/serve_bench.py at the same rates. Every run here has the same vLLM lane (8
slots), so vLLM starts once. Skipped, with the reason, where `make vllm` was not run. A figure, not a test: it
asserts nothing about time.
"""
import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request

from engine import Engine
from engine.config import LIVE_OPTIONS
from engine.limits import CLI_LIMITS
from engine.report.metrics import run_metrics
from engine.peers.vllm_options import vllm_lane_problem
from engine.peers.vllm_process import close_all, vllm_python
from scripts.bench_common import CHAT_PROMPTS, ROOT, Records, log, outputs, prepare

SLOTS = 8
# plain continuous (whole prompts, prefill apart from decode), continuous as the live lane batches (chunks under a
# token budget, fused into the decode step: vLLM V1's way), and the vLLM lane
LANES = ["continuous", {"name": "live options", "policy": "continuous", **LIVE_OPTIONS},
         {"name": "vLLM", "engine": "vllm"}]
KEEP = ("steps", "tokens", "wall_s", "tokens_per_s", "p50_ttft_ms", "p95_ttft_ms", "p50_tpot_ms", "p95_tpot_ms")
RATES = (1, 2, 4)


def mixes(size: dict) -> dict[str, dict]:
    mixed = json.loads((ROOT / "demos" / "mixed.json").read_text())
    for r in mixed["requests"]:
        r["max_new_tokens"] *= size["mixed_scale"]
    chat = {"name": "chat", "requests": [{"id": f"C{i}", "prompt": p, "max_new_tokens": size["chat_new_tokens"],
                                          "ignore_eos": False} for i, p in enumerate(CHAT_PROMPTS[:size["chat_requests"]])]}
    out = {"mixed_x8": mixed, "chat_eos": chat}
    for rate in size.get("vllm_rates", RATES):
        out[f"poisson_{rate}"] = {"name": f"poisson {rate}/s", "generate": {
            "n": size["sweep_requests"], "rate": rate, "seed": 0, "prompt_words": {"min": 8, "max": 40},
            "output_tokens": [32]}}
    return out


def vllm_race(lm, size: dict, records: Records) -> dict:
    problem = vllm_lane_problem(lm)  # no .venv-vllm (make vllm), or a model vLLM cannot read (the tiny test Llama)
    if problem is not None:
        why = f"skipped: a vLLM lane {problem}"
        log(f"  vllm_race {why}")
        return {"skipped": why}
    engine, out = Engine(lm, CLI_LIMITS), {"slots": SLOTS, "load_avg_before": os.getloadavg()[0]}
    t0 = time.perf_counter()
    for name, obj in mixes(size).items():
        wl = prepare(engine, {**obj, "slots": SLOTS, "lanes": LANES})
        run = engine.start(wl)
        if "vllm_start_s" not in out:
            out["vllm_start_s"] = round(time.perf_counter() - t0, 1)  # the first start; later runs reuse the bridge
        run.run_to_end()
        records.add("vllm_race", run)
        m = run_metrics(run.records(), run.workload)
        lanes = {lane: {k: m[lane][k] for k in KEEP} for lane in m}
        same = outputs(run, "continuous") == outputs(run, "live options") == outputs(run, "vLLM")
        over = lambda lane, k: lanes[lane][k] / lanes["vLLM"][k] if lanes["vLLM"][k] else None  # noqa: E731
        out[name] = {"lanes": lanes, "same_tokens": same,
                     "continuous_over_vllm_tokens_per_s": over("continuous", "tokens_per_s"),
                     "live_options_over_vllm": {k: over("live options", k) for k in ("tokens_per_s", "p50_ttft_ms",
                                                                                     "p50_tpot_ms")}}
        log(f"  {name}: same tokens: {same}; " + "; ".join(
            f"{lane} {x['tokens_per_s']:.1f} tok/s, TTFT p50/p95 {x['p50_ttft_ms']:.0f}/{x['p95_ttft_ms']:.0f} ms, "
            f"TPOT p50/p95 {x['p50_tpot_ms'] or 0:.0f}/{x['p95_tpot_ms'] or 0:.0f} ms" for lane, x in lanes.items()))
    if size.get("vllm_serve", True):
        close_all()  # the lane's warm vLLM holds ~4 GB: one vLLM at a time on this machine
        try:
            out["serve"] = serve_race(lm, size)
        except (OSError, RuntimeError) as e:  # a server that never got ready: the lane figures above still count
            log(f"  serve race failed: {type(e).__name__}: {e}")
            out["serve"] = {"error": f"{type(e).__name__}: {e}"}
    out["load_avg_after"] = os.getloadavg()[0]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def vllm_server(folder: str):
    """vLLM's OpenAI server on the converted float32 folder (`vllm serve` fails on a package-name lookup here)."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": "0-1",
           "VLLM_USE_AOT_COMPILE": "0"}
    env.pop("PYTHONPATH", None)
    log_file = open(os.devnull, "w")
    proc = subprocess.Popen([str(vllm_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
                             "--dtype", "float32", "--max-model-len", "2048", "--port", str(port)],
                            stdout=log_file, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM's server exited ({proc.returncode}) before it was ready")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("vLLM's server was not ready after 15 minutes") from None
                time.sleep(2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log_file.close()


SHAPES = {"single_stream": dict(rates=[1000] * 3, requests=1, max_tokens=128),  # one request alone, three times
          "burst_8": dict(rates=[1000], requests=8, max_tokens=32)}                 # eight at once


def serve_race(lm, size: dict) -> dict:
    """Our live endpoint, then vLLM's server, one at a time, each started once for the same rates and shapes (one
    stream alone; a burst of 8), so both carry their caches from shape to shape alike; the issue's four ratios
    (Batch Lanes / vLLM) under `targets`."""
    from scripts.serve_bench import serve_bench, server
    rates, n = list(size.get("vllm_rates", RATES)), size["sweep_requests"]
    shapes = {"poisson": dict(rates=rates, requests=n, max_tokens=32), **SHAPES}
    with server() as url:
        ours = {name: serve_bench(url, **shape) for name, shape in shapes.items()}
    log("  serve: Batch Lanes done; starting vLLM's server")
    with vllm_server(str(lm.folder)) as url:
        theirs = {name: serve_bench(url, **shape) for name, shape in shapes.items()}
    keep = ("output_throughput", "median_ttft_ms", "p95_ttft_ms", "median_tpot_ms", "p95_tpot_ms")
    out = {"requests": n, "max_tokens": 32, "cpu": cpu_model()}
    for name in shapes:
        out[name] = [{"rate": a["rate"], "batch_lanes": {k: a.get(k) for k in keep}, "vllm": {k: b.get(k) for k in keep},
                      "output_throughput_ratio": a["output_throughput"] / b["output_throughput"]
                      if b.get("output_throughput") else None}
                     for a, b in zip(ours[name]["points"], theirs[name]["points"])]
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    tpot = {side: median([p[side]["median_tpot_ms"] for p in out["single_stream"]]) for side in ("batch_lanes", "vllm")}
    top = next(p for p in out["poisson"] if p["rate"] == max(rates))
    ratio = lambda k: top["batch_lanes"][k] / top["vllm"][k] if top["vllm"][k] else None  # noqa: E731
    out["targets"] = {  # issue 25: >= 1.0, <= 1.0, <= 1.0, >= 1.0
        "single_stream_decode_tok_s": tpot["vllm"] / tpot["batch_lanes"],
        f"poisson_{max(rates):g}_ttft_p50": ratio("median_ttft_ms"),
        f"poisson_{max(rates):g}_tpot_p50": ratio("median_tpot_ms"),
        "burst_8_output_tok_s": out["burst_8"][0]["output_throughput_ratio"]}
    log("  serve targets (Batch Lanes / vLLM): " + ", ".join(f"{k} {v:.2f}" for k, v in out["targets"].items() if v))
    return out


def cpu_model() -> str | None:
    """lscpu's model name: which CPU a figure came from."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Model name")), None)

