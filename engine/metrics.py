"""Metrics computed from step records alone (plus each request's arrival): the CLI table, the page's
table and the benchmark all call `lane_metrics`, so no number can disagree with the canvas.
"""
from statistics import fmean

from .step import StepRecord
from .workload import Workload


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, -(-len(ordered) * q // 100) - 1))
    return ordered[int(k)]


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def lane_metrics(records: list[StepRecord] | list[dict], workload: Workload) -> dict:
    recs = [r if isinstance(r, dict) else r.to_dict() for r in records]
    slots = len(recs[0]["slots"]) if recs else workload.config.slots
    steps = len(recs)
    cum = [0.0]  # cum[s]: ms spent in steps 1..s
    for r in recs:
        cum.append(cum[-1] + r["ms"])
    simulated = bool(recs and recs[0].get("extra", {}).get("simulated"))
    per = {spec.id: {"arrival": spec.arrival, "first_token_step": None, "finish_step": None, "return_step": None,
                     "token_ids": [], "text": "", "stop": None, "preemptions": 0} for spec in workload.requests}
    counts = {"prefill": 0, "decode": 0, "padding": 0, "idle": 0, "preempted": 0}
    for r in recs:
        for cell in r["slots"]:
            counts[cell["state"]] += 1
            if cell["token_id"] is None:
                continue
            q = per[cell["request"]]
            if q["first_token_step"] is None:
                q["first_token_step"] = r["step"]
            q["token_ids"].append(cell["token_id"])
            if cell.get("stop"):
                q["stop"] = cell["stop"]
            if cell.get("stop") != "eos" and cell["token"]:
                q["text"] += cell["token"]
        for rid in r["finished"]:
            per[rid]["finish_step"] = r["step"]
        for rid in r["returned"]:
            per[rid]["return_step"] = r["step"]
        for rid in r.get("preempted", ()):
            per[rid]["preemptions"] += 1
    for q in per.values():
        q["tokens"] = len(q["token_ids"])
        a, first, fin, ret = q["arrival"], q["first_token_step"], q["finish_step"], q["return_step"]
        q["ttft_steps"] = None if first is None else first - a
        q["latency_steps"] = None if ret is None else ret - a
        timed = not simulated and ret is not None
        q["ttft_ms"] = cum[first] - cum[a] if timed else None
        q["latency_ms"] = cum[ret] - cum[a] if timed else None
        q["tpot_ms"] = (cum[fin] - cum[first]) / (q["tokens"] - 1) if timed and q["tokens"] > 1 else None
    tokens = sum(q["tokens"] for q in per.values())
    wall_s = cum[-1] / 1000

    def stat(key: str) -> list[float]:
        return [q[key] for q in per.values() if q[key] is not None]

    return {
        "steps": steps,
        "tokens": tokens,
        "tokens_per_step": tokens / steps if steps else 0.0,
        "slot_use": tokens / (slots * steps) if steps else 0.0,
        "padding_slot_steps": counts["padding"],
        "idle_slot_steps": counts["idle"],
        "prefill_slot_steps": counts["prefill"],
        "preemptions": counts["preempted"],
        "mean_ttft_steps": _mean(stat("ttft_steps")),
        "mean_latency_steps": _mean(stat("latency_steps")),
        "p50_latency_steps": percentile(stat("latency_steps"), 50),
        "p95_latency_steps": percentile(stat("latency_steps"), 95),
        "wall_s": None if simulated else wall_s,
        "tokens_per_s": tokens / wall_s if not simulated and wall_s > 0 else None,
        "mean_ttft_ms": _mean(stat("ttft_ms")),
        "p50_ttft_ms": percentile(stat("ttft_ms"), 50),
        "p95_ttft_ms": percentile(stat("ttft_ms"), 95),
        "mean_tpot_ms": _mean(stat("tpot_ms")),
        "p50_tpot_ms": percentile(stat("tpot_ms"), 50),
        "p95_tpot_ms": percentile(stat("tpot_ms"), 95),
        "mean_latency_ms": _mean(stat("latency_ms")),
        "p95_latency_ms": percentile(stat("latency_ms"), 95),
        "simulated": simulated,
        "requests": per,
    }


REQUEST_FIELDS = ("arrival", "first_token_step", "finish_step", "return_step", "ttft_steps", "latency_steps",
                  "tokens", "token_ids", "text", "stop", "preemptions", "ttft_ms", "tpot_ms", "latency_ms")


def run_metrics(records: dict[str, list], workload: Workload) -> dict[str, dict]:
    """{lane: metrics} for a run's records: the object the CLI's --json prints under "lanes" and the
    server sends in `run_finished`."""
    out = {}
    for lane, recs in records.items():
        m = lane_metrics(recs, workload)
        m["requests"] = {rid: {k: q[k] for k in REQUEST_FIELDS} for rid, q in m["requests"].items()}
        out[lane] = m
    return out
