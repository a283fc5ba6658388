"""Load sweeps: the curve every serving paper shows. Re-run one mix at several request rates on every lane
and report what `vllm bench serve` reports, under the same names, for each (rate, lane).

    python -m engine sweep WORKLOAD.json --rates 1,2,4,8 [--lanes ...] [--slo-ttft-ms N] [--slo-tpot-ms N] [--json]
    (its command line is cli.py's, with the same lane flags as `run`)

A workload with a `generate` section is generated again at each rate (same seed, so the same prompts
and lengths); any other workload keeps its requests and draws their arrivals at each rate (Poisson, or
Gamma with `--burstiness`); a workload with a `trace` section replays its slice compressed or stretched in time to
each rate (engine/workload/trace.py), its own burstiness kept. Every point is an ordinary run, so its lanes can be opened and replayed.
Numbers come from `metrics.run_metrics`, i.e. from the step records (serialized once a point). It knows nothing of flags or sockets:
cli.py parses a sweep's command line (and prints `format_sweep`), app/ streams one.
"""
from typing import Callable, Iterator, NamedTuple

from engine.workload.arrivals import retime
from engine.limits import Limits, WorkloadError, check_number
from engine.report.metric_table import format_value, text_columns
from engine.report.metrics import run_metrics
from engine.step import tick_ms
from engine.workload.slo import SLO, meets_slo
from engine.workload.trace import trace_at_rate
from engine.workload.workload import parse_workload

MAX_RATES = 12


def at_rate(obj: dict, rate: float, burstiness: float | None = None) -> dict:
    """The workload object `obj` with its arrivals drawn at `rate` requests per second (a trace slice: compressed or
    stretched in time to that rate, its own burstiness kept)."""
    if "trace" in obj:
        return trace_at_rate(obj, rate, burstiness)
    if "generate" in obj and isinstance(obj["generate"], dict):
        gen = {**obj["generate"], "rate": rate}
        if burstiness is not None:
            gen["burstiness"] = burstiness
        return {**obj, "generate": gen}
    requests = obj.get("requests")
    if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
        raise WorkloadError("requests", "must be a list of request objects")
    return {**obj, "requests": retime(requests, rate, 1.0 if burstiness is None else burstiness)}


def offered_rate(workload) -> float | None:
    """The rate the drawn arrivals really have: (n - 1) gaps over the last arrival, in requests per second. A
    handful of draws can land well off the asked rate (12 Poisson arrivals at 1/s span 4 to 18 s by seed)."""
    times = sorted(r.arrival_ms for r in workload.requests)
    return (len(times) - 1) / (times[-1] / 1000) if len(times) > 1 and times[-1] > 0 else None


def check_rates(rates, max_rates: int = MAX_RATES) -> list[float]:
    """Distinct request rates (requests per second), lowest first; WorkloadError on field `rates`."""
    if not isinstance(rates, list) or not 1 <= len(rates) <= max_rates:
        raise WorkloadError("rates", f"must be a list of 1 to {max_rates} request rates (requests per second)")
    return sorted({float(check_number(r, f"rates[{i}]", 0.01, 1000)) for i, r in enumerate(rates)})


def serving_metrics(m: dict, slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None) -> dict:
    """One lane's metrics under `vllm bench serve`'s names; goodput counts the returned requests meeting every SLO
    given (engine/workload/slo.py meets_slo: a one-token answer has no TPOT and meets the TPOT SLO), every returned
    request when none is given."""
    done = [q for q in m["requests"].values() if q["return_step"] is not None]
    duration = m["wall_s"]
    slo = None if slo_ttft_ms is None and slo_tpot_ms is None else SLO(slo_ttft_ms, slo_tpot_ms)
    good = [q for q in done if slo is None or meets_slo(q, slo)]
    out = {"completed": len(done), "duration": duration, "total_output_tokens": m["tokens"],
           "request_throughput": m["requests_per_s"], "output_throughput": m["tokens_per_s"],
           "request_goodput": len(good) / duration if duration else None}
    for key, name in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("latency", "e2el")):
        out[f"mean_{name}_ms"] = m[f"mean_{key}_ms"]
        out[f"median_{name}_ms"] = m[f"p50_{key}_ms"]
        out[f"p95_{name}_ms"] = m[f"p95_{key}_ms"]
        out[f"p99_{name}_ms"] = m[f"p99_{key}_ms"]
    return out


def prepare_sweep(engine, obj: dict, rates: list[float], limits: Limits, lanes=None,
                  burstiness: float | None = None, options: dict | None = None) -> list[tuple[float, object]]:
    """(rate, prepared workload) for every rate: every limit is checked before anything runs. `options` are
    `parse_workload` overrides (slots, lanes, engine options), as a run takes them."""
    overrides = {**(options or {}), **({"lanes": lanes} if lanes is not None else {})}
    return [(r, engine.prepare(parse_workload(at_rate(obj, r, burstiness), limits, **overrides))) for r in rates]


class SweepTick(NamedTuple):
    """One tick of a sweep's current rate. Once the rate's run is done, `point` is its serving metrics lane by lane,
    computed from `metrics` (run_metrics, computed once) of `records` (the run's step records, serialized once):
    what a stored point keeps."""
    rate: float
    run: object
    point: dict | None
    records: dict[str, list[dict]] | None = None
    metrics: dict[str, dict] | None = None
    ms: float = 0.0   # the tick's longest step (what a paced simulator sleeps for it, as a run's tick)


def iter_sweep(engine, prepared: list[tuple[float, object]], slo_ttft_ms: float | None = None,
               slo_tpot_ms: float | None = None) -> Iterator[SweepTick]:
    """Run each rate's workload tick by tick: yields a `SweepTick` after every tick, whose `point` is None until
    that rate's run is done. A caller may stop iterating any time."""
    for rate, workload in prepared:
        run = engine.start(workload)
        while not run.done:
            ticked = run.tick()
            yield SweepTick(rate, run, None, ms=tick_ms(ticked))
        records = {name: [r.to_dict() for r in recs] for name, recs in run.records().items()}
        metrics = run_metrics(records, run.workload)
        lanes = {name: serving_metrics(m, slo_ttft_ms, slo_tpot_ms) for name, m in metrics.items()}
        yield SweepTick(rate, run, {"rate": rate, "offered_rate": offered_rate(workload), "lanes": lanes}, records,
                        metrics)


def run_sweep(engine, obj: dict, rates: list[float], limits: Limits, lanes=None, burstiness: float | None = None,
              slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None,
              on_point: Callable[[dict, object], None] | None = None, options: dict | None = None) -> dict:
    """Run `obj` at every rate on its lanes (or `lanes`) with the `parse_workload` overrides `options`;
    `on_point(point, run)` after each rate's run."""
    prepared = prepare_sweep(engine, obj, rates, limits, lanes, burstiness, options)
    points = []
    for tick in iter_sweep(engine, prepared, slo_ttft_ms, slo_tpot_ms):
        if tick.point is not None:
            points.append(tick.point)
            if on_point is not None:
                on_point(tick.point, tick.run)
    return {"rates": rates, "points": points, "lanes": prepared[0][1].lane_names,
            "slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms}


def crossing_rate(result: dict, lane: str, key: str = "p95_ttft_ms", threshold: float = 2000.0) -> float | None:
    """The lowest rate at which `lane`'s `key` exceeds `threshold` (None: never within the sweep)."""
    for point in result["points"]:
        value = point["lanes"][lane][key]
        if value is not None and value > threshold:
            return point["rate"]
    return None


def format_sweep(result: dict, where: str) -> str:
    lines = [f"sweep - {where}", ""]
    columns = text_columns("sweep")  # the metric table's "sweep" table
    width = max(11, *(len(n) for n in result["lanes"]))
    head = " ".join([f"{'rate/s':>7} {'drawn':>6} {'lane':<{width}}", *(f"{h:>{w}}" for _, _, w, h in columns)])
    lines += [head, "-" * len(head)]
    for point in result["points"]:
        for lane, s in point["lanes"].items():
            lines.append(" ".join([f"{point['rate']:>7g} {format_value(point['offered_rate'], '.2f'):>6} {lane:<{width}}",
                                   *(f"{format_value(s[key], fmt):>{w}}" for key, fmt, w, _ in columns)]))
    crossings = {lane: crossing_rate(result, lane) for lane in result["lanes"]}
    lines += ["", "p95 TTFT above 2 s from: " + ", ".join(
        f"{lane} {'-' if r is None else f'{r:g}/s'}" for lane, r in crossings.items())]
    return "\n".join(lines)
