"""Metrics computed from step records alone (plus each request's arrival): the CLI table, the page's
table, the sweeps and the benchmark all call `lane_metrics`, so no number can disagree with the canvas.

Times are on the lane's clock: each record's `start_ms` and `ms` (a gap between two steps is time the
lane waited for arrivals). A request arrives at its `arrival_ms`, or, when arrivals count steps, at the
start of step `arrival` + 1; its TTFT and latency count from there to the end of the step that wrote its
first token, or returned it; its queue time to the start of the step that first admitted it.
static/js/core/metrics.js computes the same numbers the same way; tests/golden holds both to the same answers.

`METRICS` (engine/report/metric_table.py) is the one definition of every number `lane_metrics` returns: its label,
unit, which way is better, format and glossary term; `TABLES` there says where each shows. The page reads them
from static/js/core/catalog.js (`python -m engine.report.catalog`).
"""
import bisect

from engine.report.fleet_metrics import FLEET_METRICS, FLEET_REQUEST_FIELDS, fleet_metrics
from engine.report.pd_metrics import PD_REQUEST_FIELDS, pd_metrics
from engine.report.metric_table import METRICS, TABLES, Column, Metric, format_value  # noqa: F401 (re-exported)
from engine.report.stats import mean as _mean, percentile  # noqa: F401 (percentile re-exported)
from engine.report.tp_metrics import tensor_parallel_figures
from engine.step import SlotState, StepRecord
from engine.workload.slo import slo_figures
from engine.workload.workload import Workload


def lane_times(records: list[dict]) -> tuple[list[float], list[float]]:
    """(starts, ends): each step's start and end on the lane clock, in ms. Records stored before lanes had clocks
    carry no `start_ms`: their steps follow each other without gaps."""
    starts, ends, t = [], [], 0.0
    for r in records:
        start = r.get("start_ms", t)
        t = start + r["ms"]
        starts.append(start)
        ends.append(t)
    return starts, ends


def prompt_tokens(recs: list[dict]) -> tuple[int, int]:
    """(computed, cached): prompt tokens the lane's prefill cells computed, and took from the prefix cache."""
    progress, computed, cached = {}, 0, 0
    for r in recs:
        for cell in r["slots"]:
            if cell["request"] is not None:
                done, hit, progress[cell["request"]] = cell_prompt_tokens(cell, progress.get(cell["request"], 0))
                computed, cached = computed + done, cached + hit
    return computed, cached


def evictions(record: dict) -> list[tuple[str, bool]]:
    """The requests a step evicted to free KV memory, each with whether it was swapped out: its cell is PREEMPTED (its
    blocks freed, recomputed when it runs again) or SWAPPED (its blocks copied to the host pool, it resumes where it
    stopped). Both are evictions: `preemptions` counts every one, `swaps` the swap-outs (a swap lane whose host pool
    is full recomputes its victim instead). static/js/core/metrics.js evictions is its twin."""
    return [(cell["request"], cell["state"] == SlotState.SWAPPED) for cell in record["slots"]
            if cell["state"] in (SlotState.PREEMPTED, SlotState.SWAPPED)]


def cell_prompt_tokens(cell: dict, before: int) -> tuple[int, int, int]:
    """A cell's prompt tokens: (computed, taken from the prefix cache, its request's prefill progress after it), given
    its progress `before`. A cell's `prefill` says how far its request's prefill got; what it added beyond its
    `cached` part was computed. A preempted request starts again from 0 (its prompt and tokens so far are computed
    again: counted again). The lane metrics and the live lane's /metrics both count with it."""
    if cell["state"] == SlotState.PREEMPTED:
        return 0, 0, 0
    if cell["state"] == SlotState.PREFILL and cell.get("prefill"):
        hit = cell.get("cached", 0)
        return cell["prefill"][0] - before - hit, hit, cell["prefill"][0]
    return 0, 0, before


def request_times(arrival_ms: float, admitted_ms: float | None, first_token_ms: float | None,
                  finish_ms: float | None, return_ms: float | None, tokens: int) -> dict[str, float | None]:
    """A request's times in ms from the moments of its life on the lane clock (None: not yet): queue time, from its
    arrival to the start of the step that first admitted it; TTFT, to the end of the step that wrote its first token;
    TPOT, from its first token to its last over the tokens after the first; latency, to its return. The one
    definition: `lane_metrics` and the live lane (its Live view and /metrics) both call it; static/js/core/metrics.js's
    requestTimes is its twin, held to the same answers by tests/golden."""
    def since(start: float | None, t: float | None) -> float | None:
        return None if start is None or t is None else t - start
    return {"queue_ms": since(arrival_ms, admitted_ms), "ttft_ms": since(arrival_ms, first_token_ms),
            "tpot_ms": since(first_token_ms, finish_ms) / (tokens - 1)
            if tokens > 1 and first_token_ms is not None and finish_ms is not None else None,
            "latency_ms": since(arrival_ms, return_ms)}


def step_shape(record: dict, progress: dict[str, int]) -> str | None:
    """A step's shape: its forward kind, the rows it computed and the token positions they held ("split|4|67"); None
    for a step that computed nothing. `progress` (request -> prompt tokens read so far) is updated as in
    `prompt_tokens`, so a prefill chunk counts only the tokens it added."""
    if record.get("forward", "none") == "none":
        return None
    rows = tokens = 0
    for cell in record["slots"]:
        state = cell["state"]
        if state == SlotState.PREEMPTED:
            progress[cell["request"]] = 0
        elif state == SlotState.PREFILL and cell.get("prefill"):
            rows += 1
            tokens += cell["prefill"][0] - progress.get(cell["request"], 0) - cell.get("cached", 0)
            progress[cell["request"]] = cell["prefill"][0]
        elif state in (SlotState.DECODE, SlotState.PADDING):
            rows += 1
            tokens += 1 + (cell.get("proposed") or 0)
    return f"{record['forward']}|{rows}|{tokens}"


def step_time_spread(recs: list[dict]) -> float | None:
    """How much steps of the same shape (`step_shape`) varied in time on this lane: each such step's distance from
    its shape's median ms as a share of that median, and of those the 90th percentile (0.12: nine steps in ten of
    a repeated shape were within 12% of its median). None when no shape was computed twice. The simulator's cost
    model gives 0. The page says "step times varied +-12%" from it (static/js/lanes/noise.js)."""
    progress, by_shape = {}, {}
    for r in recs:
        shape = step_shape(r, progress)
        if shape is not None:
            by_shape.setdefault(shape, []).append(r["ms"])
    deviations = []
    for times in by_shape.values():
        middle = percentile(times, 50)
        if len(times) > 1 and middle > 0:
            deviations += [abs(t - middle) / middle for t in times]
    return percentile(deviations, 90)


def token_utilization(recs: list[dict], block_size: int) -> float | None:
    """Token slots holding a token, summed over every step, / the token slots of the device blocks requests hold
    (each block once, shared or not), summed over the same steps; the state after each step is rebuilt from the
    records' deltas (`kv_dropped`, then `kv_tables`; `kv_tokens` names every request holding blocks). Cached blocks
    no request holds and the host pool count in neither. None: the records carry no block tables (a run stored
    before paging). static/js/core/memmap.js tokenUtilization is its twin."""
    if not any(k in r for r in recs for k in ("kv_tables", "kv_tokens", "kv_dropped", "kv_swapped")):
        return None
    tables: dict[str, list[int]] = {}
    filled = slots = 0
    for r in recs:
        for rid in r.get("kv_dropped", ()):
            tables.pop(rid, None)
        tables.update(r.get("kv_tables", {}))
        tokens = r.get("kv_tokens", {})
        tables = {rid: t for rid, t in tables.items() if rid in tokens}
        fill: dict[int, int] = {}
        for rid, table in tables.items():
            for i, block in enumerate(table):
                fill[block] = max(fill.get(block, 0), min(block_size, max(0, tokens[rid] - i * block_size)))
        filled += sum(fill.values())
        slots += len(fill) * block_size
    return filled / slots if slots else None


def lane_block_size(recs: list[dict], workload: Workload) -> int:
    """The KV block size of the lane these records are of: its pool's (the first record's kv_pool), else its own
    option, else the workload's (records compacted without their lane's name or pool: the workload's)."""
    pool = recs[0].get("kv_pool") if recs else None
    if pool:
        return pool["block_size"]
    name = recs[0].get("lane") if recs else None
    lane = next((spec for spec in workload.lanes if spec.name == name), None)
    return (lane.config if lane else workload.config).kv_block_size


def is_simulated(record: dict) -> bool:
    """A record's simulated flag: a top-level field, or (runs stored before it was one) in its `extra`."""
    return bool(record.get("simulated", record.get("extra", {}).get("simulated")))


def lane_metrics(records: list[StepRecord] | list[dict], workload: Workload) -> dict:
    recs = [r if isinstance(r, dict) else r.to_dict() for r in records]
    if recs and recs[0].get("roles"):  # a P/D lane: its requests read across the hand-off
        return pd_metrics(recs, workload, lane_metrics)
    if recs and recs[0].get("replicas") is not None:  # a fleet: its replicas' lane metrics, merged
        return fleet_metrics(recs, workload, lane_metrics)
    slots = len(recs[0]["slots"]) if recs else workload.config.slots
    steps = len(recs)
    starts, ends = lane_times(recs)
    end = [0.0] + ends  # end[s]: the lane clock when step s ended (end[0]: the lane's start)
    simulated = bool(recs) and is_simulated(recs[0])
    per = {}
    for spec in workload.requests:
        if spec.arrival_ms is not None:  # arrived at a time: in the first step that starts at or after it
            arrival_ms, arrival = spec.arrival_ms, bisect.bisect_left(starts, spec.arrival_ms)
        else:  # arrived at a step: when that step starts
            arrival = spec.arrival
            arrival_ms = starts[arrival] if arrival < steps else end[-1]
        per[spec.id] = {"arrival": arrival, "arrival_ms": arrival_ms, "first_token_step": None, "finish_step": None,
                        "return_step": None, "admit_step": None, "token_ids": [], "token_steps": [], "text": "",
                        "stop": None, "preemptions": 0}
    counts = {state: 0 for state in SlotState}  # a str Enum: a cell's "prefill" counts under SlotState.PREFILL
    written_cells = decode_tokens = proposed = accepted = evicted = swaps = 0
    for r in recs:
        for rid in r.get("admitted", ()):
            if per[rid]["admit_step"] is None:  # its first admission: a preempted request's later ones are not queueing
                per[rid]["admit_step"] = r["step"]
        for cell in r["slots"]:
            counts[SlotState(cell["state"])] += 1
            if cell["token_id"] is None:
                continue
            q = per[cell["request"]]
            if q["first_token_step"] is None:
                q["first_token_step"] = r["step"]
            ids = cell.get("tokens") or [cell["token_id"]]  # a speculative cell may write several tokens
            q["token_ids"] += ids
            q["token_steps"].append(r["step"])  # one entry per cell: tokens written together have no gap between them
            written_cells += 1
            if cell["state"] == "decode":
                decode_tokens += len(ids)
            proposed += cell.get("proposed") or 0
            accepted += cell.get("accepted") or 0
            if cell.get("stop"):
                q["stop"] = cell["stop"]
            if (cell.get("tokens") or cell.get("stop") != "eos") and cell["token"]:
                q["text"] += cell["token"]  # an EOS writes no text; a several-token cell's text holds no EOS
        for rid in r["finished"]:
            per[rid]["finish_step"] = r["step"]
        for rid in r["returned"]:
            per[rid]["return_step"] = r["step"]
        for rid, swapped in evictions(r):
            per[rid]["preemptions"] += 1
            evicted += 1
            swaps += swapped
    itl = []  # every gap between two tokens of one request, in ms
    for q in per.values():
        q["tokens"] = len(q["token_ids"])
        a, first, fin, ret = q["arrival"], q["first_token_step"], q["finish_step"], q["return_step"]
        q["ttft_steps"] = None if first is None else first - a
        q["latency_steps"] = None if ret is None else ret - a
        done = ret is not None and fin is not None  # token times count once it was returned (a P/D prefill engine's
                                                    # hand-offs are returned there unfinished: they count elsewhere)
        q.update(request_times(q["arrival_ms"], None if q["admit_step"] is None else starts[q["admit_step"] - 1],
                               end[first] if done else None, end[fin] if done else None, end[ret] if done else None,
                               q["tokens"]))
        if done:
            itl += [end[b] - end[a] for a, b in zip(q["token_steps"], q["token_steps"][1:])]
    tokens = sum(q["tokens"] for q in per.values())
    wall_s = end[-1] / 1000
    returned = sum(1 for q in per.values() if q["return_step"] is not None)

    def stat(key: str) -> list[float]:
        return [q[key] for q in per.values() if q[key] is not None]

    out = {
        "steps": steps,
        "tokens": tokens,
        "tokens_per_step": tokens / steps if steps else 0.0,
        "slot_use": written_cells / (slots * steps) if steps else 0.0,
        "padding_slot_steps": counts[SlotState.PADDING],
        "idle_slot_steps": counts[SlotState.IDLE],
        "prefill_slot_steps": counts[SlotState.PREFILL],
        "preemptions": evicted,  # every eviction, recomputed or swapped out
        "swaps": swaps,          # of those, the swap-outs
        "mean_ttft_steps": _mean(stat("ttft_steps")),
        "mean_latency_steps": _mean(stat("latency_steps")),
        "p50_latency_steps": percentile(stat("latency_steps"), 50),
        "p95_latency_steps": percentile(stat("latency_steps"), 95),
        "wall_s": wall_s,
        "tokens_per_s": tokens / wall_s if wall_s > 0 else None,
        "requests_per_s": returned / wall_s if wall_s > 0 else None,
        **slo_figures(list(per.values()), wall_s, workload.slo),  # slo_met, request_goodput, slo_attainment
        "spec_acceptance_rate": accepted / proposed if proposed else None,  # proposals kept / proposals verified
        "tokens_per_decode_cell": decode_tokens / counts[SlotState.DECODE] if counts[SlotState.DECODE] else None,
    }
    for key, values in (("ttft", stat("ttft_ms")), ("tpot", stat("tpot_ms")), ("itl", itl),
                        ("latency", stat("latency_ms")), ("queue", stat("queue_ms"))):
        out[f"mean_{key}_ms"] = _mean(values)
        for q in (50, 95, 99):
            out[f"p{q}_{key}_ms"] = percentile(values, q)
    computed, cached = prompt_tokens(recs)
    out["prompt_tokens_computed"] = computed
    out["prompt_tokens_cached"] = cached
    out["prefix_cache_hit_rate"] = cached / (computed + cached) if computed + cached else None  # of prompt tokens, as vLLM
    out["step_time_spread"] = step_time_spread(recs)
    out["token_utilization"] = token_utilization(recs, lane_block_size(recs, workload))
    out.update(dict.fromkeys(FLEET_METRICS))  # a fleet's numbers: none for a lane of one engine
    out.update(tensor_parallel_figures(recs))  # a tensor-parallel lane's forward split (a lane of one process: no keys)
    if recs and recs[0].get("placement"):  # a split lane's machine statement (engine/report/placement.py)
        out["placement"] = recs[0]["placement"]
    out["simulated"] = simulated
    out["requests"] = per
    return out


REQUEST_FIELDS = ("arrival", "arrival_ms", "first_token_step", "finish_step", "return_step", "ttft_steps",
                  "latency_steps", "tokens", "token_ids", "text", "stop", "preemptions", "ttft_ms", "tpot_ms",
                  "latency_ms", "admit_step", "queue_ms")


def run_metrics(records: dict[str, list], workload: Workload) -> dict[str, dict]:
    """{lane: metrics} for a run's records: the object the CLI's --json prints under "lanes" and the
    server sends in `run_finished`."""
    out = {}
    for lane, recs in records.items():
        m = lane_metrics(recs, workload)
        m["requests"] = {rid: {k: q[k] for k in REQUEST_FIELDS + FLEET_REQUEST_FIELDS + PD_REQUEST_FIELDS
                                 if k in q}
                         for rid, q in m["requests"].items()}
        out[lane] = m
    return out
