"""The metrics of a lane of several engines (a fleet, a P/D lane), pooled from each engine's own metrics.

Each engine's records are lane records, so each engine has lane metrics over its own requests (`parts`); the lane's
are those merged: counts summed, every per-request figure (TTFT, TPOT, ITL, latency, queue) pooled over all the lane's
requests (`per`, which the caller reads across its engines as its own lane's requests went), the wall time the last
engine's end. It does not know how the requests were split (a router, a hand-off): the callers do.
"""
from engine.report.stats import mean, percentile
from engine.step import SlotState
from engine.workload.slo import slo_figures

SUMMED = ("tokens", "padding_slot_steps", "idle_slot_steps", "prefill_slot_steps", "preemptions", "swaps",
          "prompt_tokens_computed", "prompt_tokens_cached")


def pooled_metrics(steps: int, parts: list[dict | None], per: dict, cells: list[dict], itl: list[float], slo) -> dict:
    """`steps`: the lane's step records; `parts`: each engine's lane metrics (None: it never stepped); `per`: the
    lane's per-request figures; `cells`: every engine's slot cells; `itl`: every gap between two tokens of a
    returned request, on the clock of the engine that wrote them."""
    done = [p for p in parts if p]
    out = {"steps": steps, **{k: sum(p[k] for p in done) for k in SUMMED}}
    written = sum(1 for c in cells if c["token_id"] is not None)
    decode = [c for c in cells if c["state"] == SlotState.DECODE]
    proposed, accepted = sum(c.get("proposed") or 0 for c in cells), sum(c.get("accepted") or 0 for c in cells)
    wall_s = max((p["wall_s"] for p in done), default=0.0)
    returned = sum(1 for q in per.values() if q["return_step"] is not None)
    stat = lambda key: [q[key] for q in per.values() if q[key] is not None]  # noqa: E731
    out.update({
        "tokens_per_step": out["tokens"] / steps if steps else 0.0,
        "slot_use": written / len(cells) if cells else 0.0,
        "mean_ttft_steps": mean(stat("ttft_steps")), "mean_latency_steps": mean(stat("latency_steps")),
        "p50_latency_steps": percentile(stat("latency_steps"), 50),
        "p95_latency_steps": percentile(stat("latency_steps"), 95),
        "wall_s": wall_s, "tokens_per_s": out["tokens"] / wall_s if wall_s > 0 else None,
        "requests_per_s": returned / wall_s if wall_s > 0 else None,
        **slo_figures(list(per.values()), wall_s, slo),  # over the lane's requests, on its wall clock
        "spec_acceptance_rate": accepted / proposed if proposed else None,
        "tokens_per_decode_cell": sum(len(c.get("tokens") or [1]) for c in decode) / len(decode) if decode else None,
    })
    for key, values in (("ttft", stat("ttft_ms")), ("tpot", stat("tpot_ms")), ("itl", itl),
                        ("latency", stat("latency_ms")), ("queue", stat("queue_ms"))):
        out[f"mean_{key}_ms"] = mean(values)
        for q in (50, 95, 99):
            out[f"p{q}_{key}_ms"] = percentile(values, q)
    seen = out["prompt_tokens_computed"] + out["prompt_tokens_cached"]
    out["prefix_cache_hit_rate"] = out["prompt_tokens_cached"] / seen if seen else None
    spreads = [p["step_time_spread"] for p in done if p["step_time_spread"] is not None]
    out["step_time_spread"] = max(spreads, default=None)  # the noisiest engine's
    out["token_utilization"] = mean([p["token_utilization"] for p in done if p["token_utilization"] is not None])
    out["simulated"] = all(p["simulated"] for p in done)
    return out
