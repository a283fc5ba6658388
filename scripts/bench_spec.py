"""Benchmark section `speculative`: prompt-lookup speculative decoding on and off, on the presets where it pays
(demos/spec-quote.json: repeat a passage given in the prompt) and where it does not (demos/spec-chat.json:
free-form chat). Each preset's two lanes run alone, one after the other, interleaved repeat by repeat (the
order alternates), so the machine's load lands on both; figures are medians over the repeats.

Per preset and lane: wall_s (the lane clock: the sum of its measured steps), tokens_per_s, steps, the
acceptance rate and tokens per decode cell, and whether both lanes wrote the same tokens. What this module does
not know: how proposals are made or verified; it reads step records through `run_metrics`, like the page.
"""
from dataclasses import replace

from scripts.bench_common import Records, median, prepare
from scripts.bench_features import demo
from engine import Engine
from engine.report.metrics import run_metrics
from engine.workload.workload import CLI_LIMITS

PRESETS = ("spec-quote", "spec-chat")


def speculative(lm, size: dict, records: Records) -> dict:
    engine = Engine(lm, CLI_LIMITS)
    out = {}
    for name in PRESETS:
        wl = prepare(engine, demo(name, size))
        lanes = {("with" if lane.config.speculative else "without"): lane for lane in wl.lanes}
        figures = {key: [] for key in lanes}
        tokens = {}
        for rep in range(size["repeats"] + 1):  # round 0 warms up the shapes and is not kept
            order = list(lanes) if rep % 2 == 0 else list(reversed(lanes))
            for key in order:
                run = engine.start(replace(wl, lanes=(lanes[key],)))
                run.run_to_end()
                m = run_metrics(run.records(), run.workload)[lanes[key].name]
                tokens[key] = {rid: q["token_ids"] for rid, q in m["requests"].items()}
                if rep:
                    records.add("speculative", run)
                    figures[key].append(m)
        out[name] = {"lanes": {key: lanes[key].name for key in lanes}, "tokens_match": tokens["with"] == tokens["without"]}
        for key, ms in figures.items():
            out[name][key] = {"wall_s": median([m["wall_s"] for m in ms]),
                              "tokens_per_s": median([m["tokens_per_s"] for m in ms]),
                              "steps": ms[0]["steps"], "tokens": ms[0]["tokens"],
                              "spec_acceptance_rate": ms[0]["spec_acceptance_rate"],
                              "tokens_per_decode_cell": ms[0]["tokens_per_decode_cell"]}
        out[name]["speedup"] = out[name]["without"]["wall_s"] / out[name]["with"]["wall_s"]
    return out
