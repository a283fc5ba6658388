"""A tensor-parallel lane beside TP=1 on a demo, on the real model: tokens compared, step time split
(the second of two runs: the first pays first calls).

    python -m scripts.bench_tp_lane [--demo mixed] [--size 3] [--once]

Runs the demo's requests on three lanes of SmolLM2-135M (float32, greedy): the plain continuous lane (our compiled
decode kernels), the same lane on transformers' eager forward (what each rank runs, on whole weights), and the
continuous lane with `tensor_parallel_size` ranks. Prints whether each request's tokens equal the plain lane's (or
the first divergence), each lane's median step time by forward kind, the TP lane's mean compute and all-reduce ms per
step and per decoder layer (the records' layer_ms), where the ranks ran (the lane's placement), and the machine's load
before and after. `--once`: one run of the plain and TP lanes only (no warm-up run, no eager lane). A benchmark that
prints figures, not a test.
"""
import argparse
import json
import os
import statistics
from dataclasses import replace

from engine import Engine
from engine.report.metrics import run_metrics
from engine.worker.model import load_model
from engine.workload.workload import CLI_LIMITS, parse_workload
from tests.kit import ROOT


def run_lanes(lm, obj: dict, lanes: list):
    engine = Engine(lm)
    workload = engine.prepare(parse_workload({**obj, "lanes": lanes}, CLI_LIMITS))
    run = engine.start(workload)
    run.run_to_end()
    return run, run_metrics(run.records(), workload)


def medians(records) -> str:
    kinds = {}
    for r in records:
        if r.forward_ms:
            kinds.setdefault(r.forward.value, []).append(r.ms)
    return ", ".join(f"{k} {statistics.median(v):.1f} ms (n={len(v)})" for k, v in sorted(kinds.items()))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--demo", default="mixed")
    p.add_argument("--size", type=int, default=3)
    p.add_argument("--once", action="store_true", help="one run, no eager lane: the first calls' cost included")
    args = p.parse_args()
    obj = json.loads((ROOT / "demos" / f"{args.demo}.json").read_text())
    print(f"load before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; demo {args.demo}, TP={args.size}")
    lm = load_model(dtype="float32", device="cpu")
    tp_name = f"TP={args.size}"
    lanes = ["continuous", {"name": tp_name, "policy": "continuous", "tensor_parallel_size": args.size}]
    eager = None
    for _ in range(1 if args.once else 2):  # the first run pays first calls (weights packed, each rank's first forward)
        run, metrics = run_lanes(lm, obj, lanes)
        if not args.once:
            eager, _ = run_lanes(replace(lm, decode_step="eager"), obj, ["continuous"])
    plain = {r.id: r.output_ids for r in run.lanes["continuous"].requests}
    split = {r.id: r.output_ids for r in run.lanes[tp_name].requests}
    same = [rid for rid in plain if plain[rid] == split[rid]]
    print(f"tokens: {len(same)} of {len(plain)} requests equal to TP=1")
    for rid in plain:
        if plain[rid] != split[rid]:
            at = next(i for i, (a, b) in enumerate(zip(plain[rid], split[rid])) if a != b)
            print(f"  {rid}: first divergence at output token {at}: {plain[rid][at]} (TP=1) vs {split[rid][at]}")
    print(f"TP=1 (compiled kernels): {medians(run.lanes['continuous'].records)}")
    if eager is not None:
        print(f"TP=1 (transformers eager): {medians(eager.lanes['continuous'].records)}")
    print(f"{tp_name}: {medians(run.lanes[tp_name].records)}")
    m = metrics[tp_name]
    print(f"{tp_name} per step: compute {m['mean_compute_ms']:.1f} ms, all-reduce {m['mean_allreduce_ms']:.1f} ms "
          f"({m['allreduces_per_step']:.0f} all-reduces), step {statistics.fmean(r.ms for r in run.lanes[tp_name].records if r.forward_ms):.1f} ms mean")
    layers(run.lanes[tp_name].records)
    print(f"{tp_name} ran as: {run.lanes[tp_name].records[0].placement['says']}")
    print(f"load after: {os.getloadavg()[0]:.1f}")


def layers(records) -> None:
    """Each decoder layer's compute and all-reduce ms, the mean over the steps that computed: the layers' spread."""
    split = [r.layer_ms for r in records if r.layer_ms]
    means = [(statistics.fmean(s[i][0] for s in split), statistics.fmean(s[i][1] for s in split))
             for i in range(len(split[0]))]
    share = [a / (c + a) for c, a in means]
    print(f"per layer (mean of {len(split)} steps): compute {min(c for c, _ in means):.2f}-{max(c for c, _ in means):.2f} ms,"
          f" all-reduce {min(a for _, a in means):.2f}-{max(a for _, a in means):.2f} ms; all-reduce share"
          f" {min(share):.0%}-{max(share):.0%}; layer 0 {means[0][0]:.2f}+{means[0][1]:.2f},"
          f" layer {len(means) - 1} {means[-1][0]:.2f}+{means[-1][1]:.2f} ms")


if __name__ == "__main__":
    main()
