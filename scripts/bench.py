"""Benchmark Batch Lanes' engine next to transformers' own generate() and generate_batch(), side by side in
one run, and print one JSON object (a benchmark, not a test: nothing here asserts a timing).

    .venv/bin/python scripts/bench.py            # the full run (a few minutes on 2 CPU cores)
    .venv/bin/python scripts/bench.py --quick    # a small smoke version of every section

Sections (each a key of the JSON; `targets` sums up the goals):
  static_vs_generate      our static lane vs model.generate() on the same left-padded batch, batch 1/4/8/16
  continuous_vs_generate_batch   our continuous lane vs transformers' continuous batching on a chat workload
                          with EOS stops
  mixed_x8                continuous vs static wall seconds on demos/mixed.json with every length x8
  overhead                engine time outside the model's forward calls, as a share of step time
  decode_floor            the batch-1 decode step next to the weight-read floor (weight bytes / bandwidth)
  split_vs_fused          a joiner's prefill next to others' decode: two calls vs one fused (packed) call
  chunked_prefill         decoders' step time while a ~400-token prompt is prefilled, with and without chunks
                          (split, and fused for the first chunk size)
  preemption              preemptions (and steps) vs the KV budget on a workload with more work than memory

Every ratio compares runs made in the same process, interleaved repeat by repeat, so the load other
processes put on the machine hits both sides alike; absolute numbers still move with that load (the
JSON records the load average before and after). What this script does not know: how the engine
schedules; it only uses the public API (`Engine.prepare/start`, `Run.run_to_end`, `run_metrics`).
"""
import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

# Before torch loads OpenMP: with the default (spinning) wait policy, a 2-thread step on this 2-core machine
# ran ~50x slower whenever one other process was busy (3.5 s instead of 70 ms a decode step); sleeping
# waiters keep timings sane on a shared machine. Set OMP_WAIT_POLICY=ACTIVE to measure the default.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import Engine, parse_workload  # noqa: E402
from engine.metrics import run_metrics  # noqa: E402
from engine.workload import CLI_LIMITS  # noqa: E402

CHAT_PROMPTS = [
    "What is the capital of France?", "Why is the sky blue? Answer briefly.",
    "Name three colours of the rainbow, please.", "Translate 'good morning' into French.",
    "List two planets.", "What is 2 + 2?", "Write a haiku about the sea.", "Who wrote Hamlet?",
    "Give me one tip for sleeping better.", "What does a bee make?", "Explain what a noun is in one sentence.",
    "How many legs does a spider have?", "Suggest a name for a black cat.", "What is the boiling point of water?",
    "Describe a rainbow to a child.", "Is a tomato a fruit?",
]
SIZES = {  # what each section runs; --quick shrinks everything to a smoke test
    "full": dict(repeats=3, batches=(1, 4, 8, 16), static_new_tokens=24,
                 chat_requests=16, chat_slots=8, chat_new_tokens=48, chat_repeats=2,
                 mixed_scale=8, mixed_repeats=2, fused_prompt_lens=(8, 64, 256),
                 demo_max_new_tokens=None, chunk_sizes=(64, 128), pressure_budgets=(None, 320, 224, 128),
                 bandwidth_mib=512),
    "quick": dict(repeats=1, batches=(1, 2), static_new_tokens=3,
                  chat_requests=4, chat_slots=2, chat_new_tokens=6, chat_repeats=1,
                  mixed_scale=1, mixed_repeats=1, fused_prompt_lens=(8,),
                  demo_max_new_tokens=4, chunk_sizes=(128,), pressure_budgets=(None, 128),
                  bandwidth_mib=32),
}


T0 = time.perf_counter()


def log(message: str) -> None:
    print(f"[bench {time.perf_counter() - T0:6.1f}s] {message}", file=sys.stderr, flush=True)


def median(values) -> float:
    return statistics.median(values)


def prepare(engine: Engine, obj: dict):
    return engine.prepare(parse_workload(obj, CLI_LIMITS))


def timed_run(engine: Engine, workload, lanes: list[str]):
    """(run, seconds) for one run of `workload` from `start` (KV cache allocation included) to its end."""
    t0 = time.perf_counter()
    run = engine.start(workload, lanes)
    run.run_to_end()
    return run, time.perf_counter() - t0


def outputs(run, lane: str) -> list[list[int]]:
    return [list(r.output_ids) for r in run.lanes[lane].scheduler.requests]


def side_by_side(theirs, ours, repeats: int) -> dict:
    """Time `theirs()` and `ours()` (each returns (output, seconds)) `repeats` times, alternating which runs
    first, so that a change in the machine's load lands on both; the ratio is the median of each pair's
    their/our seconds (above 1: ours is faster)."""
    their_s, our_s, outs = [], [], []
    for i in range(repeats):
        pair = {}
        for name, fn in ((("theirs", theirs), ("ours", ours)) if i % 2 == 0 else (("ours", ours), ("theirs", theirs))):
            pair[name] = fn()
        their_s.append(pair["theirs"][1])
        our_s.append(pair["ours"][1])
        outs.append((pair["theirs"][0], pair["ours"][0]))
    return {"their_s": their_s, "our_s": our_s, "outputs": outs,
            "ratio": median([t / o for t, o in zip(their_s, our_s)])}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


class Records:
    """Every step record the model runs wrote, by section: the overhead section reads them."""

    def __init__(self):
        self.by_section: dict[str, list] = {}

    def add(self, section: str, run) -> None:
        for recs in run.records().values():
            self.by_section.setdefault(section, []).extend(recs)


# -- 1) static lane vs generate() -----------------------------------------------------------------------
def static_vs_generate(lm, size: dict, records: Records) -> dict:
    from transformers import GenerationConfig

    engine, n = Engine(lm, CLI_LIMITS), size["static_new_tokens"]
    rows = {}
    for batch in size["batches"]:
        # varied prompts, so the batch really is left-padded; ignore_eos: both write exactly n tokens
        prompts = [CHAT_PROMPTS[i % len(CHAT_PROMPTS)] * (1 + i // len(CHAT_PROMPTS)) for i in range(batch)]
        wl = prepare(engine, {"name": f"static-{batch}", "slots": batch, "requests": [
            {"id": f"R{i}", "prompt": p, "max_new_tokens": n, "ignore_eos": True} for i, p in enumerate(prompts)]})
        ids = [list(s.prompt_ids) for s in wl.requests]
        width = max(map(len, ids))
        x = torch.tensor([[lm.pad_id] * (width - len(i)) + i for i in ids], device=lm.device)  # (B, T) left-padded
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids], device=lm.device)
        # eos_token_id=[] turns EOS off (None would fall back to the model's EOS; min_new_tokens would mask
        # EOS logits and change the argmax)
        config = GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=[], pad_token_id=lm.pad_id)

        def generate():
            with torch.inference_mode():
                return lm.model.generate(x, attention_mask=mask, generation_config=config)[:, width:].tolist()

        def static():
            run, seconds = timed_run(engine, wl, ["static"])
            records.add("static_vs_generate", run)
            return run, seconds

        if batch == size["batches"][0]:  # warm-up (first calls pay one-off allocations), both sides
            generate()
            timed_run(engine, wl, ["static"])
        res = side_by_side(lambda: timed(generate), static, size["repeats"])
        run = res["outputs"][-1][1]
        decode_ms = [r.ms for r in run.lanes["static"].records if r.forward == "decode"]
        tokens = batch * n
        rows[str(batch)] = {
            "generate_tokens_per_s": tokens / median(res["their_s"]), "static_tokens_per_s": tokens / median(res["our_s"]),
            "ratio": res["ratio"], "generate_s": res["their_s"], "static_s": res["our_s"],
            "static_decode_step_ms": median(decode_ms) if decode_ms else None,
            "prompt_tokens": [len(i) for i in ids], "new_tokens": n,
            "tokens_match": all(outputs(r, "static") == ref for ref, r in res["outputs"])}
    return {"batches": rows, "min_ratio": min(r["ratio"] for r in rows.values()),
            "tokens_match": all(r["tokens_match"] for r in rows.values())}


# -- 2) continuous lane vs transformers' generate_batch() ----------------------------------------------------
def continuous_vs_generate_batch(lm, size: dict, records: Records) -> dict:
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    engine, n, slots = Engine(lm, CLI_LIMITS), size["chat_new_tokens"], size["chat_slots"]
    prompts = [CHAT_PROMPTS[i % len(CHAT_PROMPTS)] for i in range(size["chat_requests"])]
    wl = prepare(engine, {"name": "chat", "slots": slots, "requests": [
        {"id": f"R{i}", "prompt": p, "max_new_tokens": n, "ignore_eos": False} for i, p in enumerate(prompts)]})
    ids = [list(s.prompt_ids) for s in wl.requests]
    config = GenerationConfig(max_new_tokens=n, do_sample=False, pad_token_id=lm.pad_id,
                              eos_token_id=sorted(lm.eos_ids) or None)
    # same slots as our lane; a small explicit cache (on CPU it would otherwise size itself from host RAM)
    page = 64
    cb_config = ContinuousBatchingConfig(
        max_requests_per_batch=slots, page_size=page, allow_block_sharing=False,
        num_blocks=slots * -(-(max(map(len, ids)) + n) // page) + 2,
        max_batch_tokens=max(512, sum(sorted(map(len, ids))[-slots:])))

    call_s = []

    def generate_batch():
        """(tokens, seconds from the first request's creation to the last one's finish): the call's own start
        and stop of its worker thread (~0.3 s) are left out, which favours generate_batch."""
        t0 = time.perf_counter()
        out = list(lm.model.generate_batch(ids, generation_config=config, continuous_batching_config=cb_config,
                                           persistent_manager=True, progress_bar=False).values())
        call_s.append(time.perf_counter() - t0)
        active_s = max(o.lifespan[1] for o in out) - min(o.created_time for o in out)
        return [list(o.generated_tokens) for o in out], active_s

    import logging
    logging.getLogger("ContinuousBatchingLogger").setLevel(logging.ERROR)  # its persistent-manager warning
    try:
        t0 = time.perf_counter()
        generate_batch()  # warm-up: builds and warms transformers' manager once (kept for the timed calls)
        start_s = time.perf_counter() - t0
        timed_run(engine, wl, ["continuous"])

        def continuous():
            run, seconds = timed_run(engine, wl, ["continuous"])
            records.add("continuous_vs_generate_batch", run)
            return run, seconds

        res = side_by_side(generate_batch, continuous, size["chat_repeats"])
    finally:
        lm.model.destroy_cached_continuous_batching_manager()
    run = res["outputs"][-1][1]
    tokens = sum(len(o) for o in outputs(run, "continuous"))
    m = run_metrics(run.records(), run.workload)["continuous"]
    return {"requests": len(ids), "slots": slots, "max_new_tokens": n,
            "eos_stops": sum(q["stop"] == "eos" for q in m["requests"].values()), "tokens": tokens,
            "steps": m["steps"], "generate_batch_tokens_per_s": tokens / median(res["their_s"]),
            "continuous_tokens_per_s": tokens / median(res["our_s"]), "ratio": res["ratio"],
            "generate_batch_s": res["their_s"], "generate_batch_call_s": call_s[-len(res["their_s"]):],
            "continuous_s": res["our_s"], "generate_batch_start_s": start_s,
            "tokens_match": all(outputs(r, "continuous") == ref for ref, r in res["outputs"])}


# -- 3) continuous vs static on mixed x8 ------------------------------------------------------------------------
def mixed_x8(lm, size: dict, records: Records) -> dict:
    engine, scale = Engine(lm, CLI_LIMITS), size["mixed_scale"]
    obj = json.loads((ROOT / "demos" / "mixed.json").read_text())
    for r in obj["requests"]:
        r["max_new_tokens"] *= scale
    wl = prepare(engine, obj)
    ratios, lanes = [], {}
    for _ in range(size["mixed_repeats"]):
        run, _ = timed_run(engine, wl, ["static", "continuous"])  # one clock: each tick steps both lanes
        records.add("mixed_x8", run)
        m = run_metrics(run.records(), run.workload)
        lanes = {lane: {k: m[lane][k] for k in ("steps", "tokens", "wall_s", "tokens_per_s", "padding_slot_steps")}
                 for lane in m}
        ratios.append(m["continuous"]["wall_s"] / m["static"]["wall_s"])
    return {"scale": scale, "lengths": [r["max_new_tokens"] for r in obj["requests"]], "lanes": lanes,
            "step_ratio": lanes["continuous"]["steps"] / lanes["static"]["steps"],
            "wall_ratio": median(ratios), "wall_ratios": ratios}


# -- 4) engine time outside the forward -----------------------------------------------------------------------
def overhead(records: Records) -> dict:
    def share(recs) -> dict:
        recs = [r for r in recs if r.ms > 0]
        total, fwd = sum(r.ms for r in recs), sum(r.forward_ms for r in recs)
        outside = [r.ms - r.forward_ms for r in recs]
        return {"steps": len(recs), "share": (total - fwd) / total if total else None,
                "median_outside_ms": median(outside) if outside else None,
                "median_step_ms": median([r.ms for r in recs]) if recs else None}

    out = {name: share(recs) for name, recs in records.by_section.items()}
    out["all"] = share([r for recs in records.by_section.values() for r in recs])
    return out


# -- 5) batch-1 decode vs the weight-read floor --------------------------------------------------------------
def decode_floor(lm, size: dict, static: dict | None) -> dict:
    seen, weight_bytes = set(), 0
    for p in lm.model.parameters():  # tied embedding / lm_head counted once
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            weight_bytes += p.numel() * p.element_size()
    n = size["bandwidth_mib"] * 2**20 // 4
    src, dst = torch.ones(n, device=lm.device), torch.empty(n, device=lm.device)
    read_s, copy_s = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        src.sum().item()
        read_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        dst.copy_(src)
        if lm.device.type == "cuda":
            torch.cuda.synchronize()
        copy_s.append(time.perf_counter() - t0)
    read_bw, copy_bw = 4 * n / min(read_s), 2 * 4 * n / min(copy_s)  # best of 5: the machine's capability
    floor_ms = weight_bytes / read_bw * 1000
    decode_ms = (static or {}).get("batches", {}).get("1", {}).get("static_decode_step_ms")
    return {"weight_bytes": weight_bytes, "read_gb_per_s": read_bw / 1e9, "copy_gb_per_s": copy_bw / 1e9,
            "floor_ms": floor_ms, "decode_step_ms_batch1": decode_ms,
            "decode_over_floor": decode_ms / floor_ms if decode_ms else None}


# -- 6) split vs fused --------------------------------------------------------------------------------------------
def joiner_step(run, joiner: str):
    """The record of the step in which `joiner` prefilled (its first prefill step)."""
    return next(r for r in run.lanes["continuous"].records
                if any(c.request == joiner and c.state.value == "prefill" for c in r.slots))


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
                assert rec.forward == ("fused" if fused else "split"), rec.forward
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
            prefill = [r for r in recs if any(c.request == long_id and c.state.value == "prefill" for c in r.slots)]
            decode_only = [r.ms for r in recs if r.forward == "decode" and r.step < prefill[0].step]
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


# -- the run ----------------------------------------------------------------------------------------------------
SECTIONS = ("static_vs_generate", "continuous_vs_generate_batch", "mixed_x8", "decode_floor", "split_vs_fused",
            "chunked_prefill", "preemption")


def targets(out: dict) -> dict:
    def goal(value, target: float, higher: bool) -> dict:
        met = None if value is None else (value >= target if higher else value <= target)
        return {"value": value, "target": (">= " if higher else "<= ") + str(target), "met": met}

    get = lambda section, key: out.get(section, {}).get(key)  # noqa: E731
    return {
        "static_over_generate": goal(get("static_vs_generate", "min_ratio"), 1.0, True),
        "continuous_over_generate_batch": goal(get("continuous_vs_generate_batch", "ratio"), 1.2, True),
        "mixed_x8_continuous_over_static_wall": goal(get("mixed_x8", "wall_ratio"), 0.70, False),
        "engine_outside_forward_share": goal(out.get("overhead", {}).get("all", {}).get("share"), 0.10, False),
    }


def run_benchmark(lm, quick: bool = False, sections=SECTIONS) -> dict:
    size, records = SIZES["quick" if quick else "full"], Records()
    t0 = time.perf_counter()
    out = {"meta": {"model": lm.name, "device": str(lm.device), "dtype": str(lm.dtype).removeprefix("torch."),
                    "torch": torch.__version__, "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                    "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "quick": quick,
                    "load_avg_before": os.getloadavg()[0]}}
    for name in sections:
        log(name)
        if name == "decode_floor":
            out[name] = decode_floor(lm, size, out.get("static_vs_generate"))
        else:
            out[name] = globals()[name](lm, size, records)
    out["overhead"] = overhead(records)
    out["targets"] = targets(out)
    out["meta"]["load_avg_after"] = os.getloadavg()[0]
    out["meta"]["bench_s"] = time.perf_counter() - t0
    return out


def main(argv: list[str] | None = None, lm=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke version of every section")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated subset of " + ",".join(SECTIONS))
    parser.add_argument("--model", default=None, help="a local HF model folder or .gguf (default: SmolLM2-135M)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        parser.error(f"unknown section {bad[0]!r}")
    if lm is None:
        from engine.model import load_model
        lm = load_model(args.model, dtype=args.dtype, device=args.device)
    out = run_benchmark(lm, quick=args.quick, sections=sections)
    print(json.dumps(out, indent=1, default=float))
    return out


if __name__ == "__main__":
    main()
