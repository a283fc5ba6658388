"""Benchmark section: a load sweep on the real model (issue 9) - the curve every serving paper shows.

A generated mix (Poisson arrivals, answers of 16 to 48 tokens) runs at rising request rates on the static,
dynamic and continuous lanes, each on its own lane clock; the section reports, per rate and lane, what
`vllm bench serve` reports (through engine.report.sweep, i.e. from the step records) and the lowest rate at which
each lane's p95 TTFT crosses 2 s. A figure, not a test: it asserts nothing about time.
"""
from scripts.bench_common import Records, log
from engine import Engine
from engine.limits import CLI_LIMITS
from engine.report.sweep import crossing_rate, run_sweep

KEEP = ("completed", "duration", "request_throughput", "output_throughput", "request_goodput", "median_ttft_ms",
        "p95_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p95_tpot_ms", "median_itl_ms", "p99_itl_ms",
        "median_e2el_ms", "p95_e2el_ms")


def load_sweep(lm, size: dict, records: Records | None = None) -> dict:
    """size: {"sweep_rates": [...], "sweep_requests": n, "sweep_output": {"min", "max"}}."""
    workload = {"name": "sweep", "slots": 4,
                "lanes": ["static", {"name": "dynamic", "policy": "dynamic", "max_wait_ms": 1000}, "continuous"],
                "generate": {"n": size["sweep_requests"], "rate": 1, "seed": 0, "prompt_words": {"min": 8, "max": 40},
                             "output_tokens": size["sweep_output"]}}

    def progress(point, run):
        log(f"  sweep {point['rate']:g}/s: " + ", ".join(
            f"{lane} p95 TTFT {s['p95_ttft_ms']:.0f} ms" for lane, s in point["lanes"].items()))
        if records is not None:
            records.add("load_sweep", run)

    result = run_sweep(Engine(lm, CLI_LIMITS), workload, size["sweep_rates"], CLI_LIMITS, slo_ttft_ms=2000,
                       slo_tpot_ms=200, on_point=progress)
    return {"requests": size["sweep_requests"], "output_tokens": size["sweep_output"], "slots": 4,
            "slo_ttft_ms": 2000, "slo_tpot_ms": 200,
            "points": [{"rate": p["rate"], "offered_rate": p["offered_rate"],
                        "lanes": {lane: {k: s[k] for k in KEEP} for lane, s in p["lanes"].items()}}
                       for p in result["points"]],
            "p95_ttft_over_2s_from_rate": {lane: crossing_rate(result, lane) for lane in result["lanes"]}}
