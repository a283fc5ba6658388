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

from engine.report.pooled import pooled_metrics
from engine.report.stats import mean
from engine.step import SlotState

FLEET_METRICS = ("mean_load_imbalance", "max_load_imbalance", "prefix_hit_rate_available", "prefix_hit_rate_achieved")
FLEET_REQUEST_FIELDS = ("replica", "route")  # per request: the replica it went to, the router's branch
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
    out = pooled_metrics(len(recs), parts, per, [c for lane in lanes for r in lane for c in r["slots"]],
                         itl(lanes, per), workload.slo)
    out.update(imbalance(recs))
    prompt = sum(route["prompt_tokens"] for route in routes)
    out["prefix_hit_rate_available"] = sum(max(route["matched"]) for route in routes) / prompt if prompt else None
    out["prefix_hit_rate_achieved"] = sum(route["matched"][route["replica"]] for route in routes) / prompt \
        if prompt else None
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
