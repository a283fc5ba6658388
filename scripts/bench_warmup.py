"""Benchmark section `first_vs_second_run`: is the first run after a server start skewed by a cold model?

Each measurement is a fresh process (this file again, `python -m scripts.bench_warmup --child` from the repo root):
it loads the model as the server does (`app/runs/loader.py`: `load_model`, then `warm_up` for every row count up to
max_slots, on a thread of its own), then runs demos/mixed.json on the static and continuous lanes twice, from
another thread as the server's worker does, and reports each lane's step-1 ms in both runs. The same without the
warm-up shows what it is for. The issue's criterion: with the warm-up, the first run's step 1 is within 1.5x of the
second run's on every lane. Run it through `bench.py --sections first_vs_second_run`.
"""
import argparse
import json
import subprocess
import sys
import threading
import time

from scripts.bench_common import ROOT, log, median

CRITERION = 1.5  # first run's step-1 ms / second run's, per lane, at most


def first_vs_second_run(model_args: tuple, size: dict) -> dict:
    """Fresh processes with and without the warm-up, alternating (so that a change in the machine's load lands
    on both); the medians over processes judge the criterion."""
    out = {"criterion": f"with the warm-up, each lane's step-1 ms in the first run <= {CRITERION}x the second run's",
           "max_slots": size["warmup_slots"], "processes": size["fresh_processes"]}
    children = {True: [], False: []}
    for i in range(size["fresh_processes"]):
        for warm in (True, False) if i % 2 == 0 else (False, True):
            log(f"first_vs_second_run: fresh process {i + 1}, {'with' if warm else 'without'} warm-up")
            children[warm].append(child(model_args, warm, size))
    for warm, runs in children.items():
        lanes = runs[0]["step1_ms"]
        out["with_warm_up" if warm else "without_warm_up"] = {
            "runs": runs,
            "median_ratio": {lane: median([r["ratio"][lane] for r in runs]) for lane in lanes},
            "median_later_steps_ratio": {lane: median([r["later_steps_ratio"][lane] for r in runs]) for lane in lanes},
            "median_load_s": median([r["load_s"] for r in runs]),
            "median_warm_up_s": median([r["warm_up"]["seconds"] for r in runs]) if warm else None}
    ratios = out["with_warm_up"]["median_ratio"]
    out["criterion_met"] = max(ratios.values()) <= CRITERION
    return out


def child(model_args: tuple, warm: bool, size: dict) -> dict:
    path, dtype, device = model_args
    cmd = [sys.executable, "-m", "scripts.bench_warmup", "--child", "--dtype", dtype, "--device", device,
           "--max-slots", str(size["warmup_slots"]), "--warm-up" if warm else "--no-warm-up"]
    if path:
        cmd += ["--model", str(path)]
    if size["demo_max_new_tokens"]:
        cmd += ["--max-new-tokens", str(size["demo_max_new_tokens"])]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"the fresh process failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def measure(args) -> dict:
    """In this (fresh) process: load as the server does, then mixed twice; step 1 of each lane in each run."""
    from engine import Engine, parse_workload
    from engine.worker.model import load_model
    from engine.warmup import warm_up

    loaded = {}

    def load():  # the server loads on a thread of its own and runs on its worker's
        t0 = time.perf_counter()
        loaded["lm"] = load_model(args.model, dtype=args.dtype, device=args.device)
        loaded["load_s"] = time.perf_counter() - t0
        loaded["warm_up"] = warm_up(loaded["lm"], args.max_slots) if args.warm_up else None
    loader = threading.Thread(target=load)
    loader.start()
    loader.join()
    if "warm_up" not in loaded:
        raise SystemExit("loading or warming up failed (see above)")
    obj = json.loads((ROOT / "demos" / "mixed.json").read_text())
    for r in obj["requests"]:
        r["max_new_tokens"] = min(r["max_new_tokens"], args.max_new_tokens or r["max_new_tokens"])
    engine = Engine(loaded["lm"])
    workload = engine.prepare(parse_workload(obj))
    step1, later = [], []  # by run: each lane's step-1 ms; the median ms of its later steps
    for _ in range(2):
        run = engine.start(workload, ["static", "continuous"])
        run.run_to_end()
        step1.append({lane: records[0].ms for lane, records in run.records().items()})
        later.append({lane: median([r.ms for r in records[1:]]) for lane, records in run.records().items()})
    lanes = list(step1[0])
    return {"load_s": loaded["load_s"], "warm_up": loaded["warm_up"],
            "step1_ms": {lane: [step1[0][lane], step1[1][lane]] for lane in lanes},
            "ratio": {lane: round(step1[0][lane] / step1[1][lane], 3) for lane in lanes},
            # the control: a first run slower in its later steps too met a busier machine, not a cold model
            "later_steps_ratio": {lane: round(later[0][lane] / later[1][lane], 3) for lane in lanes}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one fresh-process measurement of first_vs_second_run")
    parser.add_argument("--child", action="store_true", required=True, help="(started by bench.py)")
    parser.add_argument("--model", default=None)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--max-slots", type=int, default=16)
    parser.add_argument("--warm-up", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="cap every request's max_new_tokens")
    print(json.dumps(measure(parser.parse_args()), default=float))
