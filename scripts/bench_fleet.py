"""What a fleet teaches, in the two larger workloads the presets fleet-sessions and fleet-herding grew from
(docs/fleets.md): prints each lane's prefix hit rate (taken, available, achieved), mean TTFT, load imbalance, tokens/s and the router's branches.

    .venv/bin/python -m scripts.bench_fleet [--backend sim|model] [--dump DIR]

- sessions: six tutoring sessions of four turns each (every turn's prompt is its session's history plus a question),
  Poisson arrivals at 4/s: one engine with 8 slots against two replicas of 4 behind each router.
- herding: 32 requests behind one hot system prompt, one every 25 ms: cache_aware with its default guard
  (balance_abs_threshold 64, never reached here), with a guard of 4, and round robin.
On the simulator the figures are its cost model's (no noise); --backend model runs the default model (slow on a
CPU: minutes; `--only sessions --routers round_robin cache_aware` for less). `--dump DIR` writes the two workloads as JSON for `python -m engine run`.
The same idea as real servers (Batch Lanes behind the real vllm-router against vLLM's `--data-parallel-size 2`, under
vLLM's own client) is scripts/fleet_race.py.
"""
import argparse
import collections
import json
import random
from pathlib import Path

from engine import Engine
from engine.report.metrics import run_metrics
from engine.workload.workload import CLI_LIMITS, parse_workload

TOPICS = ["the Roman roads", "how vaccines work", "the French revolution", "black holes", "compilers", "coral reefs"]
BASE = {"policy": "continuous", "prefix_cache": True}


ROUTERS = ("round_robin", "cache_aware", "consistent_hash", "kv_aware", "vllm_dp", "least_loaded")


def sessions(routers: tuple[str, ...] = ROUTERS) -> dict:
    rng, t, reqs = random.Random(1), 0.0, []
    history = {s: f"You are a patient tutor. We talk about {topic}. Keep every answer short. " * 2
               for s, topic in enumerate(TOPICS)}
    for i, s in enumerate(s for _ in range(4) for s in rng.sample(range(6), 6)):
        history[s] += f"Question {i}: tell me one more fact about {TOPICS[s]}. "
        t += rng.expovariate(4.0) * 1000
        reqs.append({"id": f"s{s}t{i}", "prompt": history[s], "max_new_tokens": 12, "arrival_ms": round(t, 1),
                     "session": f"s{s}"})
    return {"name": "sessions", "slots": 4, "requests": reqs, "lanes": [
        {"name": "1 x 8 slots", **BASE, "slots": 8},
        *({"name": f"2 x {r}", **BASE, "data_parallel_size": 2, "router": r} for r in routers)]}


def herding() -> dict:
    hot = "Shared hot system prompt for every user of this app. " * 4
    reqs = [{"id": f"h{i}", "prompt": hot + f"User {i} asks a question.", "max_new_tokens": 24,
             "arrival_ms": 25.0 * i} for i in range(32)]
    fleet = {**BASE, "data_parallel_size": 2}
    return {"name": "herding", "slots": 4, "requests": reqs, "lanes": [
        {"name": "cache_aware, guard 64", **fleet, "router": "cache_aware"},
        {"name": "cache_aware, guard 4", **fleet, "router": "cache_aware", "balance_abs_threshold": 4},
        {"name": "round robin", **fleet, "router": "round_robin"}]}


def table(engine: Engine, obj: dict) -> list[str]:
    run = engine.start(engine.prepare(parse_workload(obj, CLI_LIMITS)))
    run.run_to_end()
    f = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    lines = [f"{obj['name']}: {len(obj['requests'])} requests",
             f"  {'lane':22} {'hit':>5} {'avail':>6} {'achvd':>6} {'TTFT ms':>8} {'imb':>5} {'max':>4} {'tok/s':>7}  branches"]
    for name, m in run_metrics(run.records(), run.workload).items():
        branches = collections.Counter(q.get("route") for q in m["requests"].values() if q.get("route"))
        lines.append(f"  {name:22} {f(m['prefix_cache_hit_rate'], '.0%'):>5} {f(m['prefix_hit_rate_available'], '.0%'):>6}"
                     f" {f(m['prefix_hit_rate_achieved'], '.0%'):>6} {f(m['mean_ttft_ms'], '.0f'):>8}"
                     f" {f(m['mean_load_imbalance'], '.2f'):>5} {f(m['max_load_imbalance'], 'd'):>4}"
                     f" {f(m['tokens_per_s'], '.1f'):>7}  {dict(branches)}")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=("sim", "model"), default="sim")
    p.add_argument("--dump", metavar="DIR")
    p.add_argument("--routers", nargs="+", choices=ROUTERS, default=ROUTERS, help="the sessions' fleets")
    p.add_argument("--only", choices=("sessions", "herding"), help="one of the two workloads")
    args = p.parse_args()
    workloads = [w for w in (sessions(tuple(args.routers)), herding()) if args.only in (None, w["name"])]
    if args.dump:
        for obj in workloads:
            (Path(args.dump) / f"fleet-{obj['name']}.json").write_text(json.dumps(obj, indent=1))
    lm = None
    if args.backend == "model":
        from engine.worker.model import load_model
        lm = load_model(None)
    engine = Engine(lm, CLI_LIMITS)
    print(f"backend: {'simulator (its cost model)' if lm is None else lm.name}")
    for obj in workloads:
        print("\n".join(table(engine, obj)))


if __name__ == "__main__":
    main()
