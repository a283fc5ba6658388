"""Benchmark sections on the engine's own features: a joiner's prefill beside decodes (split vs fused calls),
chunked prefill of a long prompt, and preemptions vs the KV budget. Run them through `bench.py`."""
import json
import statistics
from dataclasses import replace

from scripts.bench_common import CHAT_PROMPTS, ROOT, Records, median, outputs, prepare, timed_run
from engine import Engine
from engine.report.metrics import run_metrics
from engine.step import Forward, SlotState
from engine.workload.workload import CLI_LIMITS


# -- 6) split vs fused --------------------------------------------------------------------------------------------
def joiner_step(run, joiner: str):
    """The record of the step in which `joiner` prefilled (its first prefill step)."""
    return next(r for r in run.lanes["continuous"].records
                if any(c.request == joiner and c.state is SlotState.PREFILL for c in r.slots))


def split_vs_fused(lm, size: dict, records: Records) -> dict:
    """Three decoders and a joiner whose prompt is the first `length` tokens of the long-prompt demo's."""
    engine = Engine(lm, CLI_LIMITS)
    text = max(json.loads((ROOT / "demos" / "long-prompt.json").read_text())["requests"], key=lambda r: len(r["prompt"]))
    filler = lm.encode_prompt(text["prompt"])
    rows = {}
    for length in size["fused_prompt_lens"]:
        variants = {}
        for fused in (False, True):
            obj = {"name": "join", "slots": 4, "fused": fused, "requests": [
                {"id": f"D{i}", "prompt": CHAT_PROMPTS[i], "max_new_tokens": 6, "ignore_eos": True}
                for i in range(3)] + [{"id": "J", "prompt": "x", "max_new_tokens": 2, "arrival": 2}]}
            wl = prepare(engine, obj)
            joiner = replace(wl.requests[3], prompt_ids=tuple((filler * (1 + length // len(filler)))[:length]))
            variants[fused] = replace(wl, requests=wl.requests[:3] + (joiner,))
        ms = {False: [], True: []}
        fwd = {False: [], True: []}
        outs = {}
        for rep in range(size["repeats"] + 1):  # the first round is a warm-up
            for fused, wl in variants.items():
                run, _ = timed_run(engine, wl, ["continuous"])
                rec = joiner_step(run, "J")
                assert rec.forward is (Forward.FUSED if fused else Forward.SPLIT), rec.forward
                outs[fused] = outputs(run, "continuous")
                if rep:
                    ms[fused].append(rec.ms)
                    fwd[fused].append(rec.forward_ms)
                    records.add("split_vs_fused", run)
        rows[str(length)] = {"split_ms": median(ms[False]), "fused_ms": median(ms[True]),
                             "fused_over_split": median(ms[True]) / median(ms[False]),
                             "tokens_match": outs[False] == outs[True]}
    return {"decoders": 3, "prompt_lens": rows}


# -- 7) chunked prefill and preemption (issue 5) ----------------------------------------------------------------
def demo(name: str, size: dict) -> dict:
    """A workload of demos/ (in --quick, every request shortened to a few tokens)."""
    obj = json.loads((ROOT / "demos" / f"{name}.json").read_text())
    if size["demo_max_new_tokens"]:
        for r in obj["requests"]:
            r["max_new_tokens"] = min(r["max_new_tokens"], size["demo_max_new_tokens"])
            r["arrival"] = min(r["arrival"], 1)
    return obj


def chunked_prefill(lm, size: dict, records: Records) -> dict:
    """demos/long-prompt.json: a ~425-token prompt joins three decoders, prefilled whole or in chunks."""
    engine = Engine(lm, CLI_LIMITS)
    base = demo("long-prompt", size)
    long_id = max(base["requests"], key=lambda r: len(r["prompt"]))["id"]
    decoders = [r["id"] for r in base["requests"] if r["id"] != long_id]
    first = size["chunk_sizes"][0]
    variants = {"none": base} | {str(c): base | {"chunk_size": c} for c in size["chunk_sizes"]} \
        | {f"{first}+fused": base | {"chunk_size": first, "fused": True}}  # each chunk and the decodes in one call
    workloads = {k: prepare(engine, v) for k, v in variants.items()}
    runs = {k: [] for k in variants}
    for rep in range(size["repeats"]):  # the first round also warms up: it is kept only in --quick
        for key, wl in workloads.items():
            run, _ = timed_run(engine, wl, ["continuous"])
            if rep or size["repeats"] == 1:
                records.add("chunked_prefill", run)
                runs[key].append(run)
    out = {"prompt_tokens": len(next(s for s in workloads["none"].requests if s.id == long_id).prompt_ids),
           "decoders": len(decoders), "variants": {}}
    for key, key_runs in runs.items():
        per = []
        for run in key_runs:
            recs = run.lanes["continuous"].records
            prefill = [r for r in recs if any(c.request == long_id and c.state is SlotState.PREFILL for c in r.slots)]
            decode_only = [r.ms for r in recs if r.forward is Forward.DECODE and r.step < prefill[0].step]
            m = run_metrics(run.records(), run.workload)["continuous"]
            tpots = [m["requests"][d]["tpot_ms"] for d in decoders if m["requests"][d]["tpot_ms"] is not None]
            per.append({"prefill_steps": len(prefill), "max_prefill_step_ms": max(r.ms for r in prefill),
                        "prefill_window_ms": sum(r.ms for r in prefill),
                        "decode_only_step_ms": median(decode_only) if decode_only else None,
                        "decoders_mean_tpot_ms": statistics.fmean(tpots) if tpots else None,
                        "wall_s": m["wall_s"]})
        out["variants"][key] = {k: median([p[k] for p in per]) if per[0][k] is not None else None for k in per[0]}
    stall = out["variants"]["none"]["max_prefill_step_ms"]
    for v in out["variants"].values():
        v["ms_saved_for_decoders"] = stall - v["max_prefill_step_ms"]  # the worst step the decoders wait through
    return out


def preemption(lm, size: dict, records: Records) -> dict:
    """demos/memory-pressure.json at several KV budgets: continuous preempts, static admits smaller groups."""
    engine = Engine(lm, CLI_LIMITS)
    rows = []
    for budget in size["pressure_budgets"]:
        obj = demo("memory-pressure", size)
        obj.pop("kv_budget", None)
        if budget is not None:
            obj["kv_budget"] = budget
        run, _ = timed_run(engine, prepare(engine, obj), ["static", "continuous"])
        records.add("preemption", run)
        m = run_metrics(run.records(), run.workload)
        rows.append({"kv_budget": budget,
                     "continuous": {k: m["continuous"][k] for k in ("steps", "preemptions", "prefill_slot_steps", "wall_s")},
                     "static": {k: m["static"][k] for k in ("steps", "wall_s")},
                     "tokens_match": outputs(run, "static") == outputs(run, "continuous")})
    return {"requests": len(obj["requests"]), "slots": obj["slots"], "budgets": rows}
