"""The metric table: one declarative definition of every number `metrics.lane_metrics` returns, and of the tables
that show them. The CLI table, the sweep table, and (through static/js/core/catalog.js, `python -m engine.report.catalog`)
the page's metrics table, compare table, sweep table, CSV export and glossary all read their columns here.

A metric is a key with a label, a unit, which way is better, a format and a glossary term; a table is an
ordered tuple of columns, each showing one metric or several in one cell. Adding a metric: compute it in
`lane_metrics` (and static/js/core/metrics.js), add its `Metric` here, and name it in the `TABLES` it shows in;
tests/engine/report/test_metrics_table.py fails until the three agree. This module computes nothing and knows no records.
"""
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Metric:
    key: str                  # the key in lane_metrics' result
    label: str                # how a table heads it ("mean TTFT ms")
    unit: str                 # "steps", "tokens", "cells", "ms", "s", "1/s", "share" (0..1), "" (a ratio)
    better: str | None        # "lower", "higher", or None (neither: more tokens is not better)
    fmt: str                  # a Python format spec the page also understands: "d", ".2f", ".0%", ",.0f"
    term: str                 # its GLOSSARY key (several metrics share a term: every TTFT figure is "ttft")
    serve: str | None = None  # its name in `vllm bench serve`'s report (sweep.serving_metrics), if it has one


@dataclass(frozen=True)
class Column:
    key: str                        # the cell's data-metric: a metric key, or the name of a cell several share
    metrics: tuple[str, ...]        # the metrics it shows: one, or several joined by `sep` (a dash if the first is None)
    label: str | None = None        # its heading (None: the metric's label)
    fmt: str | None = None          # its format (None: each metric's own); "mean" = one decimal and the exact value
    sep: str = " / "
    term: str | None = None         # its glossary term (None: the first metric's)
    when: str | None = None         # shown only for a run with a "speculative" lane / a "prefix_cache" hit /
                                    # "paged" block tables in its records / a "swap" out / an "slo" set
    group: str = ""                 # a heading over neighbouring columns (the sweep table)
    short: str | None = None        # the CLI's heading, where it differs from `label`
    width: int = 0                  # the CLI's column width (0: the heading's)


_MS = {"ttft": ("TTFT", None), "tpot": ("TPOT", None), "itl": ("ITL", None), "latency": ("latency", "e2el"),
       "queue": ("queue", None)}


def _ms_metrics() -> list[Metric]:
    out = []
    for key, (name, serve) in _MS.items():
        for q, serve_q in (("mean", "mean"), ("p50", "median"), ("p95", "p95"), ("p99", "p99")):
            out.append(Metric(f"{q}_{key}_ms", f"{q} {name} ms", "ms", "lower", ".0f", key,
                              None if key == "queue" else f"{serve_q}_{serve or key}_ms"))
    return out


# Every number of lane_metrics, in the CSV's column order.
METRICS: dict[str, Metric] = {m.key: m for m in [
    Metric("steps", "steps", "steps", "lower", "d", "steps"),
    Metric("tokens", "tokens", "tokens", None, "d", "tokens", "total_output_tokens"),
    Metric("tokens_per_step", "tokens / step", "tokens", "higher", ".2f", "tokens_per_step"),
    Metric("slot_use", "slot use", "share", "higher", ".0%", "slot_use"),
    Metric("mean_ttft_steps", "mean TTFT steps", "steps", "lower", ".3f", "ttft"),
    Metric("mean_latency_steps", "mean latency steps", "steps", "lower", ".2f", "latency"),
    Metric("p50_latency_steps", "p50 latency steps", "steps", "lower", "d", "latency"),
    Metric("p95_latency_steps", "p95 latency steps", "steps", "lower", "d", "latency"),
    Metric("wall_s", "wall time s", "s", "lower", ".2f", "wall_time", "duration"),
    Metric("tokens_per_s", "tokens/s", "1/s", "higher", ".1f", "tokens_per_s", "output_throughput"),
    Metric("requests_per_s", "requests/s", "1/s", "higher", ".2f", "requests_per_s", "request_throughput"),
    # the workload's SLO (engine/workload/slo.py); none when it sets no targets
    Metric("slo_met", "met SLO", "requests", "higher", "d", "slo"),
    Metric("request_goodput", "goodput req/s", "1/s", "higher", ".2f", "goodput"),
    Metric("slo_attainment", "SLO attainment", "share", "higher", ".0%", "slo"),
    *_ms_metrics(),
    Metric("padding_slot_steps", "padding cells", "cells", "lower", "d", "padding_cells"),
    Metric("idle_slot_steps", "idle cells", "cells", "lower", "d", "idle"),
    Metric("prefill_slot_steps", "prefill cells", "cells", None, "d", "prefill"),
    Metric("preemptions", "preempted", "cells", "lower", "d", "preempted"),  # every eviction: recomputed or swapped
    Metric("swaps", "swapped out", "cells", "lower", "d", "swapped"),         # of those, the swap-outs
    Metric("prompt_tokens_computed", "prompt tokens computed", "tokens", "lower", "d", "prompt_tokens"),
    Metric("prompt_tokens_cached", "prompt tokens cached", "tokens", "higher", "d", "prompt_tokens"),
    Metric("prefix_cache_hit_rate", "prefix cache hit rate", "share", "higher", ".0%", "hit_rate"),
    Metric("spec_acceptance_rate", "lookup kept", "share", "higher", ".0%", "speculative"),
    Metric("tokens_per_decode_cell", "tokens / decode cell", "tokens", "higher", ".2f", "speculative"),
    Metric("step_time_spread", "step time spread", "share", "lower", ".0%", "step_noise"),
    Metric("token_utilization", "token utilization", "share", "higher", ".0%", "token_utilization"),
    # a fleet's (engine/report/fleet_metrics.py); none for a lane of one engine
    Metric("mean_load_imbalance", "mean load imbalance", "requests", "lower", ".2f", "load_imbalance"),
    Metric("max_load_imbalance", "max load imbalance", "requests", "lower", "d", "load_imbalance"),
    Metric("prefix_hit_rate_available", "prefix hits available", "share", "higher", ".0%", "hits_available"),
    Metric("prefix_hit_rate_achieved", "prefix hits achieved", "share", "higher", ".0%", "hits_available"),
]}

# The sweep's own numbers (sweep.serving_metrics), beside those it takes from lane_metrics under `serve` names.
SERVING: dict[str, Metric] = {m.key: m for m in [
    Metric("completed", "done", "requests", "higher", "d", "requests_per_s"),
    Metric("request_goodput", "goodput req/s", "1/s", "higher", ".2f", "requests_per_s"),
    *(Metric(m.serve, m.label, m.unit, m.better, m.fmt, m.term) for m in METRICS.values() if m.serve),
]}


def _c(key: str, label: str | None = None, width: int = 0, **kw) -> Column:
    return Column(key, kw.pop("metrics", (key,)), label, width=width, **kw)


def _sweep(group: str, key: str, label: str, width: int, short: str | None = None) -> Column:
    return Column(key, (key,), label, group=group, fmt=",.0f" if group.endswith("ms") else None, short=short,
                  width=width)


# Where each metric shows: every table's columns in order (the CSV: every metric, in METRICS order).
TABLES: dict[str, tuple[Column, ...]] = {
    "page": (
        _c("steps"), _c("tokens"), _c("tokens_per_step", "tokens/step"),
        _c("speculative", "lookup kept \u00b7 tok/cell", metrics=("spec_acceptance_rate", "tokens_per_decode_cell"),
           sep=" \u00b7 ", when="speculative"),
        _c("slot_use"), _c("mean_ttft_steps", fmt="mean"), _c("mean_ttft_ms"),
        _c("ttft_ms_p50_p95", "TTFT ms p50 / p95", metrics=("p50_ttft_ms", "p95_ttft_ms")),
        _c("mean_tpot_ms"), _c("mean_itl_ms"),
        _c("latency_steps_p50_p95", "latency steps p50 / p95", metrics=("p50_latency_steps", "p95_latency_steps")),
        _c("p95_queue_ms"), _c("wall_s"), _c("tokens_per_s"), _c("requests_per_s"),
        _c("request_goodput", when="slo"), _c("slo_met", "met SLO", metrics=("slo_met", "slo_attainment"), when="slo"),
        _c("padding_slot_steps"),
        _c("preemptions"), _c("swaps", when="swap"),
        _c("prompt_tokens", "prompt tokens computed / cached", metrics=("prompt_tokens_computed", "prompt_tokens_cached"),
           when="prefix_cache"),
        _c("prefix_cache_hit_rate", when="prefix_cache"), _c("token_utilization", when="paged"),
        _c("load_imbalance", "load imbalance mean / max", metrics=("mean_load_imbalance", "max_load_imbalance"),
           when="fleet"),
        _c("prefix_hits", "prefix hits available / achieved",
           metrics=("prefix_hit_rate_available", "prefix_hit_rate_achieved"), when="fleet")),
    "compare": (
        _c("steps"), _c("tokens"), _c("tokens_per_step"), _c("slot_use"),
        _c("mean_ttft_steps", fmt="exact"), _c("mean_ttft_ms"), _c("p95_ttft_ms"), _c("p95_queue_ms"),
        _c("mean_tpot_ms"), _c("mean_latency_ms"), _c("wall_s"), _c("tokens_per_s"), _c("requests_per_s"),
        _c("padding_slot_steps"), _c("preemptions"), _c("swaps")),
    "cli": (
        _c("steps", width=5), _c("tokens", width=6), _c("tokens_per_step", "tok/step", 8), _c("slot_use", width=8),
        _c("mean_ttft_steps", "TTFT st", 8), _c("mean_latency_steps", "lat st", 7), _c("padding_slot_steps", "pad", 4),
        _c("preemptions", "evict", 5), _c("swaps", "swaps", 5), _c("wall_s", "wall s", 7),
        _c("tokens_per_s", "tok/s", 7), _c("request_goodput", "good/s", 6), _c("mean_ttft_ms", "TTFT ms", 8), _c("mean_tpot_ms", "TPOT ms", 8),
        _c("p95_queue_ms", "queue p95", 9)),
    "sweep": (  # serving_metrics' keys (SERVING), under a group heading on the page
        _sweep("", "completed", "done", 4), _sweep("throughput", "request_throughput", "req/s", 6),
        _sweep("throughput", "output_throughput", "tok/s", 7),
        _sweep("throughput", "request_goodput", "goodput req/s", 6, "good/s"),
        _sweep("TTFT ms", "median_ttft_ms", "p50", 8, "TTFT p50"), _sweep("TTFT ms", "p95_ttft_ms", "p95", 7),
        _sweep("TTFT ms", "p99_ttft_ms", "p99", 7), _sweep("TPOT ms", "median_tpot_ms", "p50", 8, "TPOT p50"),
        _sweep("TPOT ms", "p95_tpot_ms", "p95", 6), _sweep("ITL ms", "median_itl_ms", "p50", 7, "ITL p50"),
        _sweep("ITL ms", "p99_itl_ms", "p99", 6), _sweep("E2E ms", "median_e2el_ms", "p50", 7, "E2E p50"),
        _sweep("E2E ms", "p95_e2el_ms", "p95", 7), _sweep("E2E ms", "p99_e2el_ms", "p99", 7)),
}

# What each metric term means, in words a class can read off the projector (the page's glossary shows them).
GLOSSARY: dict[str, dict[str, str]] = {
    "steps": {"term": "steps", "text": "Forward passes the lane ran. In one step the model computes one row per busy slot, all at once, so fewer steps for the same requests means less work."},
    "tokens": {"term": "tokens", "text": "Answer tokens the lane wrote (prompt tokens are not counted)."},
    "tokens_per_step": {"term": "tokens/step", "text": "Tokens written divided by steps: how much useful work each forward pass did. With 4 slots, at most 4 (unless speculative decoding lets a cell write several)."},
    "slot_use": {"term": "slot use", "text": "The share of slot-steps that wrote a token: cells that wrote \u00f7 (slots \u00d7 steps). Padding and idle slots pull it down."},
    "ttft": {"term": "TTFT", "text": "Time to first token: from a request's arrival to the end of the step that wrote its first token \u2014 how long a user stares at an empty reply. In steps or ms; p50 / p95 are the median and the 95th percentile over the requests."},
    "tpot": {"term": "TPOT", "text": "Time per output token: after the first token, the average time between one token of a request and its next, (finish \u2212 first token) \u00f7 (tokens \u2212 1). Continuous batching often shows a higher mean TPOT than static: a request joining mid-run is prefilled in the same step the running requests decode in, and that step is slower for every decoding request it shares. Continuous trades a little TPOT for much less waiting (TTFT) and fewer steps."},
    "itl": {"term": "ITL", "text": "Inter-token latency: every gap between two consecutive tokens of one request, averaged over all of them. A long prefill step of another request shows up here as a stall."},
    "latency": {"term": "latency", "text": "End-to-end latency: from a request's arrival until its whole answer went back to the client. p50 / p95 are the median and the 95th percentile."},
    "queue": {"term": "queue time", "text": "From a request's arrival to the start of the first step that gave it a slot: how long it waited before any work began on it. p95: 95 of 100 requests waited at most this long."},
    "wall_time": {"term": "wall time", "text": "The lane's clock at its last step, in seconds: the measured time of every step plus any time it waited for arrivals."},
    "tokens_per_s": {"term": "tokens/s", "text": "Throughput: tokens written divided by wall time."},
    "requests_per_s": {"term": "requests/s", "text": "Requests answered divided by wall time."},
    "slo": {"term": "SLO", "text": "A service-level objective: a target for each request's TTFT (how soon its first token comes) and TPOT (how fast the rest follow), set by the preset or the teacher. A request met it when both of its times are at or under their targets (a one-token answer has no TPOT). On the canvas a tick on each request's row marks its TTFT deadline (arrival + target), and a red ring marks the cell where a request missed: the first token, when it came too late; the last, when its tokens came too slowly. In the table: how many requests met it, and their share of those answered."},
    "goodput": {"term": "goodput", "text": "Requests that met the SLO per second of wall time: the throughput that counts. A lane can answer more requests per second and still have the lower goodput, when it answers them too late; with no SLO set the table shows a dash (the load sweep then counts every request)."},
    "padding_cells": {"term": "padding cells", "text": "Slot-steps spent computing a request that had already finished but stays in its static group: work done for nothing."},
    "preempted": {"term": "preempted", "text": "KV memory ran out, so the scheduler evicted a running request to free its memory: it waits again, and its prompt and tokens so far are recomputed later (or, on a lane with preemption \"swap\", its KV blocks were swapped out to a host pool and come back). In the table: how many times that happened, both kinds counted; \"swapped out\" says how many of them were swaps."},
    "swapped": {"term": "swapped", "text": "KV memory ran out on a lane with preemption \"swap\", so the scheduler copied a running request's KV blocks out to a host pool (pinned host memory on a GPU; on a CPU another buffer in the same DRAM) and freed them: it waits, and when there is room its blocks are copied back and it goes on where it stopped, nothing recomputed. The trade: copy bandwidth against recompute compute."},
    "prompt_tokens": {"term": "prompt tokens computed / cached", "text": "Prompt tokens the lane's prefill steps computed (again after a preemption), and those it took from the prefix cache instead."},
    "hit_rate": {"term": "prefix cache hit rate", "text": "The share of prompt tokens taken from the prefix cache: cached \u00f7 (computed + cached), counted in tokens as vLLM does."},
    "token_utilization": {"term": "token utilization", "text": "Of the KV memory requests hold, the share that holds tokens: token slots holding a token \u00f7 token slots of the blocks held (each block of block_size slots counted once, shared or not), summed over every step of the run. A paged cache leaves only each request's last block part-empty; reserving prompt + max_new_tokens up front leaves most of it empty (the PagedAttention paper measured 20.4\u201338.2% for such servers, about 96% with paging). Cached blocks no request holds are not counted."},
    "step_noise": {"term": "step time spread", "text": "How noisy this machine's step times were: steps of the same shape (the same kind of forward pass, rows and tokens) should take the same time; this is how far nine in ten of them strayed from their shape's median (\u00b112% reads: within 12%). Above 25% the page warns that a lane's times may say more about the machine than about the policy. The simulator's steps have no noise."},
    "load_imbalance": {"term": "load imbalance", "text": "A fleet of replicas behind a router: after every step, the most loaded replica's requests (running or waiting) minus the least loaded one's. The mean over the run and the worst. A router that follows cached prefixes can pile one hot prefix onto one replica; a load guard (cache_aware's balance thresholds) moves it off."},
    "hits_available": {"term": "prefix hits available / achieved", "text": "A fleet of replicas behind a router: of the requests' prompt tokens, the share the best replica's prefix cache held when each request arrived (available), and the share the replica the router chose held (achieved). A round-robin router leaves most of what is available; a cache-aware one takes it, unless the load guard sends a request elsewhere."},
    "speculative": {"term": "lookup kept \u00b7 tokens/decode cell", "text": "Speculative decoding by prompt lookup: each step a request proposes the tokens that followed the same last words earlier in its prompt or answer, and one forward pass checks them all. Kept: the share of proposed tokens the model agreed with (spec_acceptance_rate). Tokens/decode cell: how many tokens a decode cell wrote on average (1 without speculation). The tokens are exactly those of plain greedy decoding."},
}


def format_value(value, fmt: str) -> str:
    """`value` printed by a format spec ("-" for None) as the CLI prints it: without thousands separators (its
    columns are narrow). static/js/core/columns.js's formatValue prints the same specs the same way on the page."""
    return "-" if value is None else format(value, fmt.replace(",", ""))


def cli_heading(column: Column) -> str:
    return column.short or column.label or METRICS[column.metrics[0]].label


def text_columns(table: str) -> list[tuple[str, str, int, str]]:
    """(key, format, width, heading) of each column of `table` ("cli", "sweep") as the command line prints it: one
    value a column, right-aligned under its heading."""
    known = {**METRICS, **SERVING}
    return [(c.metrics[0], c.fmt or known[c.metrics[0]].fmt, max(c.width, len(cli_heading(c))), cli_heading(c))
            for c in TABLES[table]]


def shows(key: str) -> list[str]:
    """The tables a metric (or serving metric) shows in, "csv" for every lane metric."""
    return [name for name, cols in TABLES.items() if any(key in c.metrics for c in cols)] + \
        (["csv"] if key in METRICS else [])


def table_dict() -> dict:
    """The table as JSON-ready data: what static/js/core/catalog.js carries."""
    metric = lambda m: {**asdict(m), "shows": shows(m.key)}  # noqa: E731
    return {"METRICS": [metric(m) for m in METRICS.values()], "SERVING": [metric(m) for m in SERVING.values()],
            "TABLES": {name: [asdict(c) | {"metrics": list(c.metrics)} for c in cols] for name, cols in TABLES.items()},
            "METRIC_GLOSSARY": GLOSSARY}
