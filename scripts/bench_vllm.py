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
from scripts.ttft_parts import ttft_parts

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


def vllm_serve(lm, size: dict, records: Records) -> dict:
    """The serve race alone (`--sections vllm_serve`): our endpoint and vLLM's server under vLLM's client."""
    if not size.get("vllm_serve", True):   # --quick: two servers and vLLM's client are minutes, not a smoke test
        return {"skipped": "not in --quick"}
    problem = vllm_lane_problem(lm)
    if problem is not None:
        log(f"  vllm_serve skipped: a vLLM server {problem}")
        return {"skipped": f"a vLLM server {problem}"}
    return serve_race(lm, size)


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


# the shapes, each on both endpoints: one stream of 128 tokens (three requests, one at a time), Poisson 4 req/s
# (24 x 64 prompt tokens / 32 out), a burst of 8 x 32
SHAPES = {"one_stream": dict(input=64, output=128, prompts=3, rate="inf", concurrency=1),
          "poisson_4": dict(input=64, output=32, prompts=24, rate=4),
          "burst_8": dict(input=64, output=32, prompts=8, rate="inf")}
ENDPOINTS = ("completions", "chat")


def peer_client(url: str, folder: str, parts: bool = False) -> dict:
    """Every shape on both endpoints against the server at `url`, by vLLM's own client in .venv-vllm
    (scripts/vllm_client.py), after one small warm-up burst; the load average before and after. `parts` (our
    server): what each Poisson 4 request's TTFT was made of, from /api/live's step records (scripts/ttft_parts.py)."""
    with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as r:
        model = json.load(r)["data"][0]["id"]
    shapes = {"warm_up": dict(endpoint="completions", input=64, output=16, prompts=4, rate="inf")}
    shapes.update({f"{endpoint}/{name}": {**shape, "endpoint": endpoint}
                   for endpoint in ENDPOINTS for name, shape in SHAPES.items()})
    if parts:
        for endpoint in ENDPOINTS:
            shapes[f"{endpoint}/poisson_4"]["detail"] = "/api/live"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    load = os.getloadavg()[0]
    p = subprocess.run([str(vllm_python()), str(ROOT / "scripts" / "vllm_client.py"), url, model, folder,
                        json.dumps(shapes)], capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"vLLM's client failed: {p.stderr.strip().splitlines()[-1:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out.pop("warm_up")
    for shape in out.values():
        if "snapshot" in shape:
            shape["ttft_parts"] = ttft_parts(shape.pop("snapshot"), shape.pop("ttfts_ms"))
            log(f"    TTFT parts p50 (ms): {shape['ttft_parts']['p50']}; steps: {shape['ttft_parts']['steps']}")
    return {"shapes": out, "load_avg": [round(load, 2), round(os.getloadavg()[0], 2)]}


def serve_race(lm, size: dict) -> dict:
    """Our live endpoint and vLLM's server, one at a time, each driven by vLLM's own client (`vllm bench serve`) on
    the same shapes; two rounds in opposite orders (ours first, then vLLM first), each server started afresh per
    round. Per round and shape, Batch Lanes / vLLM: output tok/s, TTFT p50, TPOT p50; the issue's four ratios
    (issue 40) under `targets`, one value per round."""
    from scripts.serve_bench import server
    folder = str(lm.folder)
    rounds = []
    for order in (("batch_lanes", "vllm"), ("vllm", "batch_lanes")):
        got = {}
        for side in order:
            log(f"  serve: {side} under vLLM's client")
            with (server() if side == "batch_lanes" else vllm_server(folder)) as url:
                got[side] = peer_client(url, folder, parts=side == "batch_lanes")
        rounds.append({"order": list(order), **got})
    out = {"client": "vllm bench serve (vLLM 0.32, random dataset, --ignore-eos, seed 0)", "cpu": cpu_model(),
           "shapes": {name: {k: v for k, v in shape.items()} for name, shape in SHAPES.items()}, "rounds": rounds}
    def ratio(r: dict, shape: str, key: str) -> float | None:
        a, b = r["batch_lanes"]["shapes"][shape].get(key), r["vllm"]["shapes"][shape].get(key)
        return round(a / b, 3) if a and b else None
    out["ratios"] = [{shape: {k: ratio(r, shape, k) for k in ("output_throughput", "median_ttft_ms", "median_tpot_ms")}
                      for shape in r["batch_lanes"]["shapes"]} for r in rounds]
    out["targets"] = {  # issue 40: >= 1.0, <= 1.0, <= 1.0, >= 1.0 (completions, as the issue measured)
        "one_stream_output_tok_s": [x["completions/one_stream"]["output_throughput"] for x in out["ratios"]],
        "poisson_4_ttft_p50": [x["completions/poisson_4"]["median_ttft_ms"] for x in out["ratios"]],
        "poisson_4_tpot_p50": [x["completions/poisson_4"]["median_tpot_ms"] for x in out["ratios"]],
        "burst_8_output_tok_s": [x["completions/burst_8"]["output_throughput"] for x in out["ratios"]]}
    log("  serve targets (Batch Lanes / vLLM, round 1 / round 2): " + ", ".join(
        f"{k} {' / '.join(f'{v:.2f}' if v else '-' for v in vs)}" for k, vs in out["targets"].items()))
    return out


def cpu_model() -> str | None:
    """lscpu's model name: which CPU a figure came from."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Model name")), None)

