"""Pipeline-parallel lanes beside the plain lane on the demos, on the real model: tokens compared, the measured
bubble fraction beside GPipe's (p-1)/(m+p-1), and step time (one run; a benchmark that prints figures, not a test).

    python -m scripts.bench_pp [--demos mixed long-prompt] [--micro 1 2 4]

Runs each demo's requests on SmolLM2-135M (float32, greedy) on the plain continuous lane and on PP=2 lanes (two
stage processes of 15 layers, engine/worker/pipeline_parallel.py) at each micro-batch count. Prints whether each
PP lane's tokens equal the plain lane's (or the first divergence), its mean measured bubble fraction and the formula's
mean over the same steps, each lane's median step time by forward kind, and the machine's load before and after.
"""
import argparse
import json
import os
import statistics

from engine import Engine
from engine.report.metrics import run_metrics
from engine.worker.model import load_model
from engine.workload.workload import CLI_LIMITS, parse_workload
from scripts.bench_tp_lane import medians
from tests.kit import ROOT


def divergence(plain: dict, split: dict) -> str:
    same = [rid for rid in plain if plain[rid] == split[rid]]
    out = [f"{len(same)} of {len(plain)} requests equal to the plain lane's"]
    for rid in plain:
        if plain[rid] != split[rid]:
            at = next((i for i, (a, b) in enumerate(zip(plain[rid], split[rid])) if a != b),
                      min(len(plain[rid]), len(split[rid])))
            out.append(f"{rid}: first divergence at output token {at}")
    return "; ".join(out)


def bench(lm, demo: str, micro: list[int]) -> None:
    obj = json.loads((ROOT / "demos" / f"{demo}.json").read_text())
    names = [f"PP=2 m={m}" for m in micro]
    lanes = ["continuous"] + [{"name": n, "policy": "continuous", "pipeline_parallel_size": 2, "micro_batches": m}
                              for n, m in zip(names, micro)]
    engine = Engine(lm)
    workload = engine.prepare(parse_workload({**obj, "lanes": lanes}, CLI_LIMITS))
    run = engine.start(workload)
    run.run_to_end()
    metrics = run_metrics(run.records(), workload)
    plain = {r.id: r.output_ids for r in run.lanes["continuous"].requests}
    print(f"\n{demo} (slots {workload.config.slots}): plain continuous lane: "
          f"{medians(run.lanes['continuous'].records)}")
    for name in names:
        lane, m = run.lanes[name], metrics[name]
        print(f"{name}: tokens {divergence(plain, {r.id: r.output_ids for r in lane.requests})}")
        print(f"  bubble fraction measured {m['mean_bubble_fraction']:.3f} vs formula {m['mean_bubble_formula']:.3f}"
              f" (mean over its {sum(1 for r in lane.records if r.forward_ms)} steps); {medians(lane.records)}")
        decodes = [r for r in lane.records if r.forward.value == "decode" and r.micro_batches]
        if decodes:
            full = [r for r in decodes if r.micro_batches[0] == max(d.micro_batches[0] for d in decodes)]
            print(f"  decode steps at {full[0].micro_batches[0]} micro-batches: measured "
                  f"{statistics.fmean(r.bubble_fraction for r in full):.3f} vs formula {full[0].bubble_formula:.3f} "
                  f"(n={len(full)})")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--demos", nargs="+", default=["mixed", "long-prompt"])
    p.add_argument("--micro", nargs="+", type=int, default=[1, 2, 4])
    args = p.parse_args()
    print(f"load before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    lm = load_model(dtype="float32", device="cpu")
    for demo in args.demos:
        bench(lm, demo, args.micro)
    print(f"\nload after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
