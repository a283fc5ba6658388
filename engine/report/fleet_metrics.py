"""A fleet's metrics (a data-parallel lane, engine/fleet.py), from its step records alone.

Each replica's records are lane records: `one_lane` (metrics.lane_metrics, passed in so that the two modules import
each other in no circle) gives each replica's metrics over the requests the router sent it, and the fleet's are
those merged: counts summed, every per-request figure (TTFT, TPOT, ITL, latency, queue) pooled over all the fleet's
requests, the wall time the last replica's end, so `prefix_cache_hit_rate` counts the whole fleet. Beside them, what
a fleet adds (FLEET_METRICS): the load imbalance (the max - min of the replicas' loads, requests running or waiting,
after every fleet step) and the prefix hit rates the router had on offer, **available** (the longest prefix any
replica's cache held for each request when it arrived) and **achieved** (what the replica it chose held then), as
shares of the prompt tokens (Dynamo's "hit rate available vs achieved"). `replicas` lists each replica's own
figures and its load over time.
"""
from dataclasses import replace

from engine.report.stats import mean, percentile
from engine.step import SlotState
from engine.workload.slo import slo_figures

FLEET_METRICS = ("mean_load_imbalance", "max_load_imbalance", "prefix_hit_rate_available", "prefix_hit_rate_achieved")
FLEET_REQUEST_FIELDS = ("replica", "route")  # per request: the replica it went to, the router's branch
SUMMED = ("tokens", "padding_slot_steps", "idle_slot_steps", "prefill_slot_steps", "preemptions", "swaps",
          "prompt_tokens_computed", "prompt_tokens_cached")
GONE = (SlotState.IDLE, SlotState.PREEMPTED, SlotState.SWAPPED)  # a cell whose request no longer holds the slot


def load(record: dict) -> int:
    """A replica's load after a step: requests holding a slot, and those waiting."""
    return sum(1 for c in record["slots"] if c["state"] not in GONE) + len(record["waiting"])


def fleet_metrics(recs: list[dict], workload, one_lane) -> dict:
    routes = [route for r in recs for route in r["routes"]]
    size = len(recs[0]["replicas"])
    sent = {route["request"]: route for route in routes}
    lanes = [[r["replicas"][i] for r in recs if r["replicas"][i] is not None] for i in range(size)]
    parts = []
    for i, lane in enumerate(lanes):
        mine = tuple(s for s in workload.requests if sent.get(s.id, {}).get("replica") == i)
        parts.append(one_lane(lane, replace(workload, requests=mine)) if lane else None)
    per = {}
    for i, part in enumerate(parts):
        for rid, q in (part["requests"] if part else {}).items():
            per[rid] = {**q, "replica": i, "route": sent[rid]["branch"]}
    per = {s.id: per[s.id] for s in workload.requests if s.id in per}  # in the workload's order
    done = [p for p in parts if p]
    out = {"steps": len(recs), **{k: sum(p[k] for p in done) for k in SUMMED}}
    cells = [c for lane in lanes for r in lane for c in r["slots"]]
    written = sum(1 for c in cells if c["token_id"] is not None)
    decode = [c for c in cells if c["state"] == SlotState.DECODE]
    proposed, accepted = sum(c.get("proposed") or 0 for c in cells), sum(c.get("accepted") or 0 for c in cells)
    wall_s = max((p["wall_s"] for p in done), default=0.0)
    returned = sum(1 for q in per.values() if q["return_step"] is not None)
    stat = lambda key: [q[key] for q in per.values() if q[key] is not None]  # noqa: E731
    out.update({
        "tokens_per_step": out["tokens"] / len(recs) if recs else 0.0,
        "slot_use": written / len(cells) if cells else 0.0,
        "mean_ttft_steps": mean(stat("ttft_steps")), "mean_latency_steps": mean(stat("latency_steps")),
        "p50_latency_steps": percentile(stat("latency_steps"), 50),
        "p95_latency_steps": percentile(stat("latency_steps"), 95),
        "wall_s": wall_s, "tokens_per_s": out["tokens"] / wall_s if wall_s > 0 else None,
        "requests_per_s": returned / wall_s if wall_s > 0 else None,
        **slo_figures(list(per.values()), wall_s, workload.slo),  # over the fleet's requests, on its wall clock
        "spec_acceptance_rate": accepted / proposed if proposed else None,
        "tokens_per_decode_cell": sum(len(c.get("tokens") or [1]) for c in decode) / len(decode) if decode else None,
    })
    for key, values in (("ttft", stat("ttft_ms")), ("tpot", stat("tpot_ms")), ("itl", itl(lanes, per)),
                        ("latency", stat("latency_ms")), ("queue", stat("queue_ms"))):
        out[f"mean_{key}_ms"] = mean(values)
        for q in (50, 95, 99):
            out[f"p{q}_{key}_ms"] = percentile(values, q)
    seen = out["prompt_tokens_computed"] + out["prompt_tokens_cached"]
    out["prefix_cache_hit_rate"] = out["prompt_tokens_cached"] / seen if seen else None
    spreads = [p["step_time_spread"] for p in done if p["step_time_spread"] is not None]
    out["step_time_spread"] = max(spreads, default=None)  # the noisiest replica's
    out["token_utilization"] = mean([p["token_utilization"] for p in done if p["token_utilization"] is not None])
    out.update(imbalance(recs))
    prompt = sum(route["prompt_tokens"] for route in routes)
    out["prefix_hit_rate_available"] = sum(max(route["matched"]) for route in routes) / prompt if prompt else None
    out["prefix_hit_rate_achieved"] = sum(route["matched"][route["replica"]] for route in routes) / prompt \
        if prompt else None
    out["simulated"] = all(p["simulated"] for p in done)
    out["requests"] = per
    out["replicas"] = [{"name": lane[0]["lane"] if lane else None, "requests": [s for s in per if per[s]["replica"] == i],
                        **({k: part[k] for k in ("steps", "tokens", "wall_s", "prefix_cache_hit_rate", "mean_ttft_ms",
                                                 "preemptions")} if part else {}),
                        "load": [[round(r["start_ms"] + r["ms"], 3), load(r)] for r in lane]}
                       for i, (lane, part) in enumerate(zip(lanes, parts))]
    return out


def itl(lanes: list[list[dict]], per: dict) -> list[float]:
    """Every gap between two tokens of one returned request, on its replica's clock."""
    ends = [{r["step"]: r["start_ms"] + r["ms"] for r in lane} for lane in lanes]
    gaps = []
    for q in per.values():
        if q["return_step"] is not None:
            end = ends[q["replica"]]
            gaps += [end[b] - end[a] for a, b in zip(q["token_steps"], q["token_steps"][1:])]
    return gaps


def imbalance(recs: list[dict]) -> dict:
    """max - min of the replicas' loads after each fleet step (a replica that did not step keeps its last load):
    the mean over the fleet's steps and the worst."""
    latest = [0] * len(recs[0]["replicas"])
    spread = []
    for r in recs:
        for i, rec in enumerate(r["replicas"]):
            if rec is not None:
                latest[i] = load(rec)
        spread.append(max(latest) - min(latest))
    return {"mean_load_imbalance": mean(spread), "max_load_imbalance": max(spread, default=None)}
