"""Benchmark section on prefix caching: a preset's continuous lane with and without `prefix_cache`, the two
runs interleaved (which goes first alternates), a warm-up round first. Prints each variant's lane-clock wall
time and tokens/s, the prompt tokens it computed and took from the cache, and whether both wrote the same
tokens. Run it through `bench.py` (section `prefix_cache`)."""
import json

from scripts.bench_common import ROOT, Records, median, outputs, prepare, timed_run
from engine import Engine
from engine.report.metrics import run_metrics
from engine.workload.workload import CLI_LIMITS


def preset(name: str, size: dict, prefix_cache: bool) -> dict:
    """Demo `name` on one continuous lane (in --quick, every request shortened to a few tokens)."""
    obj = json.loads((ROOT / "demos" / f"{name}.json").read_text())
    if size["demo_max_new_tokens"]:
        for r in obj["requests"]:
            r["max_new_tokens"] = min(r["max_new_tokens"], size["demo_max_new_tokens"])
    obj["lanes"] = [{"name": "continuous", "policy": "continuous", "prefix_cache": prefix_cache}]
    return obj


def prefix_cache(lm, size: dict, records: Records) -> dict:
    engine = Engine(lm, CLI_LIMITS)
    rows = {}
    for name in size["prefix_presets"]:
        variants = {flag: prepare(engine, preset(name, size, flag)) for flag in (False, True)}
        seen = {False: [], True: []}
        outs = {}
        for rep in range(size["repeats"] + 1):  # the first round is a warm-up
            for flag in ((False, True) if rep % 2 == 0 else (True, False)):
                run, seconds = timed_run(engine, variants[flag], None)
                outs[flag] = outputs(run, "continuous")
                if rep:
                    seen[flag].append((run_metrics(run.records(), run.workload)["continuous"], seconds))
                    records.add("prefix_cache", run)

        def summary(flag: bool) -> dict:
            runs = seen[flag]
            last = runs[-1][0]
            return {"wall_s": median([m["wall_s"] for m, _ in runs]),
                    "tokens_per_s": median([m["tokens_per_s"] for m, _ in runs]),
                    "run_s": median([s for _, s in runs]),
                    "mean_ttft_ms": median([m["mean_ttft_ms"] for m, _ in runs]),
                    "prompt_tokens_computed": last["prompt_tokens_computed"],
                    "prompt_tokens_cached": last["prompt_tokens_cached"],
                    "prefix_cache_hit_rate": last["prefix_cache_hit_rate"]}
        without, with_ = summary(False), summary(True)
        rows[name] = {"without": without, "with": with_, "wall_ratio": with_["wall_s"] / without["wall_s"],
                      "tokens_match": outs[False] == outs[True]}
    return {"presets": rows}
