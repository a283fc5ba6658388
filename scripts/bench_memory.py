"""Benchmark section on the memory lessons (`memory_presets`): demos/paged-vs-reserve.json and
demos/swap-vs-recompute.json on the model, each run once after a warm-up run. Prints each lane's batch size (rows
computed a step: mean and most), its token utilization (engine/report/metrics.py), its lane-clock wall time, and for the swap
lessons the blocks copied out to the host pool and the measured copy time, beside each lane's evictions (`preemptions`,
of which `swaps` were swap-outs);
whether the lanes wrote the same tokens. The per-block costs of each side, measured in isolation, are `paged_cache`'s."""
import json

from engine import Engine
from engine.report.metrics import run_metrics
from engine.step import SlotState
from engine.workload.workload import CLI_LIMITS
from scripts.bench_common import ROOT, Records, outputs, prepare

COMPUTED = (SlotState.PREFILL.value, SlotState.DECODE.value)


def demo(name: str, size: dict) -> dict:
    obj = json.loads((ROOT / "demos" / f"{name}.json").read_text())
    if size["demo_max_new_tokens"]:  # --quick: every request shortened
        for r in obj["requests"]:
            r["max_new_tokens"] = min(r["max_new_tokens"], size["demo_max_new_tokens"])
    return obj


def lane_figures(recs: list[dict], metrics: dict) -> dict:
    rows = [sum(c["state"] in COMPUTED for c in r["slots"]) for r in recs]
    swapped_out, last = 0, {}
    for r in recs:  # host blocks a request holds: a rise is a swap-out of that many blocks
        for rid, held in r.get("kv_swapped", {}).items():
            swapped_out += max(0, held - last.get(rid, 0))
            last[rid] = held
    return {"batch_mean": round(sum(rows) / max(1, sum(1 for n in rows if n)), 2), "batch_max": max(rows, default=0),
            "token_utilization": metrics["token_utilization"], "wall_s": metrics["wall_s"],
            "preemptions": metrics["preemptions"], "swaps": metrics["swaps"], "blocks_swapped_out": swapped_out,
            "copy_ms": round(sum(r.get("copy_ms", 0.0) for r in recs), 2),
            "kv_bytes": recs[0].get("kv_pool", {}).get("kv_bytes") if recs else None}


def memory_presets(lm, size: dict, records: Records) -> dict:
    engine = Engine(lm, CLI_LIMITS)
    out = {}
    for name in ("paged-vs-reserve", "swap-vs-recompute"):
        workload = prepare(engine, demo(name, size))
        engine.start(workload).run_to_end()  # warm-up
        run = engine.start(workload)
        run.run_to_end()
        records.add("memory_presets", run)
        recs = {lane: [r.to_dict() for r in rs] for lane, rs in run.records().items()}
        metrics = run_metrics(run.records(), run.workload)
        lanes = {lane: lane_figures(recs[lane], metrics[lane]) for lane in recs}
        tokens = {lane: outputs(run, lane) for lane in recs}
        out[name] = {"lanes": lanes, "same_tokens": len({json.dumps(t) for t in tokens.values()}) == 1}
    return out
