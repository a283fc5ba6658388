"""The GPU check: exactness, speed and one real server run of Batch Lanes on a CUDA device, written as one JSON report.

    scripts/gpu_check.sh [REPORT.json]          # what to run on a CUDA machine (under 8 minutes)
    python scripts/gpu_check.py --device cpu --quick --out /tmp/r.json   # the same sections, small, anywhere

Sections (each a key of the report, written as soon as it is done, so a section that fails or a run that is cut
short keeps what came before; a section that raises records its error and the next one runs):
  env            torch, transformers, the device
  tiny_graphs    a tiny random Llama: fast decode (CUDA graphs) and eager write the same tokens at 1, 3, 5, 8 rows
  exact_float32  every lane (static, dynamic, continuous, chunked 16, fused, prefix cache, prompt lookup) equals solo
                 generate() on the device, request by request, with the fast decode step (CUDA graphs) and the eager one
  bfloat16       the same workload in bfloat16: how many requests agree with solo generate() and fast with eager
                 (bfloat16 is not exact: near-ties flip between batch shapes)
  decode_steps   one decode call of 1..16 rows, eager vs fast, float32 and bfloat16 (scripts/bench_decode.py)
  bench          scripts/bench.py's static_vs_generate, continuous_vs_generate_batch, decode_steps, decode_floor
  socket_run     `python -m app` on the device, a python-socketio client submits a 4-lane workload and reads it
                 to run_finished
"""
import argparse
import json
import platform
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from engine.threads import configure  # noqa: E402
configure()  # OMP_WAIT_POLICY=PASSIVE before torch loads
import torch  # noqa: E402

from engine import Engine, parse_workload  # noqa: E402
from engine.worker.model import load_model  # noqa: E402
from engine.workload.workload import CLI_LIMITS  # noqa: E402
from tests.kit.reference import PROMPTS  # noqa: E402  (the exactness tests' prompts, the same on the device)

LANES = ["static", "dynamic", "continuous", {"name": "chunked 16", "policy": "continuous", "chunk_size": 16},
         {"name": "fused", "policy": "continuous", "fused": True},
         {"name": "prefix cache", "policy": "continuous", "prefix_cache": True},
         {"name": "prompt lookup", "policy": "continuous", "speculative": {"method": "prompt_lookup", "k": 4}}]


def workload(quick: bool) -> dict:
    n = 4 if quick else 8
    return {"name": "gpu-check", "slots": 4, "max_wait": 3, "lanes": LANES, "requests": [
        {"id": f"R{i}", "prompt": PROMPTS[i], "max_new_tokens": ([24, 6, 16, 10, 20, 24, 12, 8][i] // (4 if quick else 1)),
         "ignore_eos": i in (1, 7), "arrival": [0, 0, 0, 1, 2, 2, 5, 6][i]} for i in range(n)]}


def lane_outputs(lm, wl: dict) -> tuple[dict, list]:
    engine = Engine(lm, CLI_LIMITS)
    prepared = engine.prepare(parse_workload(wl, CLI_LIMITS))
    run = engine.start(prepared)
    run.run_to_end()
    return {name: {r.id: r.output_ids for r in lane.requests} for name, lane in run.lanes.items()}, \
        list(prepared.requests)


def agreement(lm, wl: dict) -> dict:
    """Per lane: requests equal to solo generate(), fast path and eager path; and fast vs eager request by request."""
    from tests.kit.reference import solo_generate

    fast, specs = lane_outputs(lm, wl)
    eager, _ = lane_outputs(replace(lm, decode_step="eager"), wl)
    refs = {s.id: solo_generate(lm, s.prompt_ids, s.max_new_tokens, () if s.ignore_eos else lm.eos_ids) for s in specs}
    out = {"requests": len(specs), "lanes": {}}
    for name in fast:
        out["lanes"][name] = {
            "fast_equal_generate": sum(fast[name][i] == refs[i] for i in refs),
            "eager_equal_generate": sum(eager[name][i] == refs[i] for i in refs),
            "fast_equal_eager": sum(fast[name][i] == eager[name][i] for i in refs)}
    out["all_exact"] = all(v["fast_equal_generate"] == v["eager_equal_generate"] == len(specs)
                           for v in out["lanes"].values())
    return out


def tiny_graphs(device: str) -> dict:
    """A 2-layer random Llama on the device (no tokenizer needed): rows of 1, 3, 5 and 8 slots prefill through
    transformers, then decode 6 steps with the fast step (CUDA graphs) and with the eager one; tokens compared."""
    from engine.request import Request, RequestSpec
    from engine.worker.runner import ModelRunner
    from engine.sched.batch import Row
    from engine.step import SlotState

    from scripts.gpu_paged import random_llama

    lm = random_llama(device)
    out = {}
    for n in (1, 3, 5, 8):
        t0 = time.perf_counter()
        runners = {path: ModelRunner(replace(lm, decode_step=path), 8, 8 * 4) for path in ("eager", "fast")}
        out.setdefault("runner_init_ms", {})[str(n)] = (time.perf_counter() - t0) * 1000
        requests = [Request(RequestSpec(id=f"T{i}", prompt="", max_new_tokens=8), order=i) for i in range(n)]
        prompts = [[(7 * i + j) % 1000 for j in range(3 + 2 * i)] for i in range(n)]
        seqs = {path: [list(p) for p in prompts] for path in runners}
        for step in range(7):
            for path, runner in runners.items():
                rows = [Row(i, r, SlotState.PREFILL if step == 0 else SlotState.DECODE,
                            seqs[path][i] if step == 0 else seqs[path][i][-1:],
                            0 if step == 0 else len(seqs[path][i]) - 1, True,
                            blocks=tuple(range(4 * i, 4 * i + 4))) for i, r in enumerate(requests)]
                tokens = runner.run(rows).tokens
                for i in range(n):
                    seqs[path][i].append(tokens[i])
        out[str(n)] = {"equal": seqs["eager"] == seqs["fast"], "graphs": sorted(runners["fast"].fast.graphs)
                       if runners["fast"].fast and runners["fast"].fast.graphed else None}
    out["all_equal"] = all(v["equal"] for k, v in out.items() if k.isdigit())
    return out


def socket_run(device: str, dtype: str, quick: bool) -> dict:
    from tests.kit.server import EventClient, live_server

    wl = workload(quick)
    wl["lanes"] = LANES[:3] + [{"name": "chunked 64", "policy": "continuous", "chunk_size": 64}]
    t0 = time.perf_counter()
    with live_server("--device", device, "--dtype", dtype, timeout=300) as url:
        ready_s = time.perf_counter() - t0
        client = EventClient(url)
        t1 = time.perf_counter()
        client.emit("submit", {"workload": wl})
        run_id = client.wait_for("run_queued", timeout=60)["run_id"]
        finished = client.wait_for("run_finished", run_id, timeout=240)
        ticks = client.named("tick", run_id)
        client.close()
    steps: dict = {}
    for tick in ticks:
        for lane, rec in tick["lanes"].items():
            if rec is not None:
                steps.setdefault(lane, set()).add(rec["step"])
    metrics = finished.get("metrics") or {}
    return {"server_ready_s": ready_s, "run_s": time.perf_counter() - t1, "ticks": len(ticks),
            "steps_per_lane": {lane: len(s) for lane, s in steps.items()},
            "every_step_once": all(s == set(range(1, len(s) + 1)) for s in steps.values()),
            "metrics": metrics}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true", help="small workloads and sizes: a smoke run of every section")
    p.add_argument("--out", default=str(ROOT / "artifacts" / "gpu_check.json"))
    p.add_argument("--sections", default="env,tiny_graphs,paged_graphs,exact_float32,bfloat16,decode_steps,bench,socket_run")
    args = p.parse_args(argv)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": args.device,
                    "quick": args.quick, "seconds": {}}
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA device: torch sees none (run this on a CUDA machine, or pass --device cpu)", file=sys.stderr)
        return {}
    models: dict = {}

    def model(dtype: str):
        if dtype not in models:
            t0 = time.perf_counter()
            models[dtype] = load_model(dtype=dtype, device=args.device)
            report["seconds"][f"load_{dtype}"] = time.perf_counter() - t0
        return models[dtype]

    from scripts import bench
    from scripts.bench_decode import decode_steps
    size = dict(bench.SIZES["quick" if args.quick else "full"])

    def section(name: str):
        if name == "env":
            import transformers
            return {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
                    "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor(),
                    "cuda": torch.version.cuda, "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
        if name == "tiny_graphs":
            return tiny_graphs(args.device)
        if name == "paged_graphs":
            from scripts.gpu_paged import paged_graphs
            return paged_graphs(args.device)
        if name == "exact_float32":
            return agreement(model("float32"), workload(args.quick))
        if name == "bfloat16":
            return agreement(model("bfloat16"), workload(args.quick))
        if name == "decode_steps":
            return {dtype: decode_steps(model(dtype), size) for dtype in ("float32", "bfloat16")}
        if name == "bench":
            return bench.run_benchmark(model("float32"), quick=args.quick,
                                       sections=("static_vs_generate", "continuous_vs_generate_batch", "decode_steps",
                                                 "decode_floor", "paged_cache"))
        if name == "socket_run":
            return socket_run(args.device, "float32", args.quick)
        raise ValueError(f"unknown section {name!r}")

    for name in args.sections.split(","):
        t0 = time.perf_counter()
        print(f"[gpu_check] {name} ...", file=sys.stderr, flush=True)
        try:
            report[name] = section(name)
        except Exception as e:  # a report, not a test: one failing section must not lose the others
            report[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        report["seconds"][name] = time.perf_counter() - t0
        out_path.write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({k: report[k] for k in ("seconds",)} | {"exact_float32": report.get("exact_float32", {}).get(
        "all_exact")}, default=str))
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 2)
