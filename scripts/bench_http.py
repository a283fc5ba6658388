"""What the HTTP path costs: output tokens/s at saturation through the OpenAI API next to the same engine's
continuous lane on the same requests, in-process, side by side in one run; prints one JSON object (a benchmark,
not a test: it asserts nothing about time).

    .venv/bin/python scripts/bench_http.py                      # 16 requests x 32 tokens, 3 repeats
    .venv/bin/python scripts/bench_http.py --requests 16 --max-tokens 32 --repeats 2 [--url http://...]

(a) api:  all N requests sent at once (one thread each) as streaming chat completions with the official `openai`
          client (temperature 0, ignore_eos, usage chunk) to a server's live lane (16 slots); tokens are the usage
          chunks' completion_tokens; seconds from the first send to the last content chunk (`api_s`; to the last
          stream's end: `api_end_s`).
(b) lane: the same prompts (one user message through the chat template, as the endpoint does: checked below,
          prompt token counts must agree) and output lengths as a workload on `engine.Engine`'s continuous lane
          with 16 slots in this process: tokens over the lane's wall time (lane_metrics' `wall_s`, from its first
          step's start to its last step's end), and over start() to run_to_end()'s return (`lane_call_s`, KV cache
          allocation included).

Each repeat also reads both sides' step records (the server's from GET /api/live): steps by kind, the sum of
step ms and the median decode step, and the share of the wall time spent outside steps, which separates what
the HTTP path adds (parsing, tokenizing, waiting for the worker loop, SSE) from a difference in the model's own
speed between the two processes (on a shared machine, other processes' load moves that from minute to minute).

The two sides alternate which goes first, repeat by repeat, after one untimed warm-up each, so a change in the
machine's load lands on both; `ratio` is api tokens/s over lane tokens/s (1 = the HTTP path costs nothing),
per repeat and as the median. The client's threads run on the same CPUs as the server, so the API side also
pays for the client's own HTTP and JSON work: what a benchmark on the same machine always measures.
Without `--url` the server is started here (`server` in scripts/serve_bench.py) and stopped after.
"""
import argparse
import json
import os
import statistics
import time

from engine.threads import configure

configure()  # OMP_WAIT_POLICY=PASSIVE before torch loads
from engine import Engine, parse_workload  # noqa: E402
from engine.limits import CLI_LIMITS  # noqa: E402
from engine.report.metrics import lane_metrics  # noqa: E402
from engine.step import Forward  # noqa: E402
from scripts.serve_bench import PROMPTS, get_json, log, make_client, run_rate, server  # noqa: E402


def step_summary(records: list[dict]) -> dict:
    """Where a side's time went, from its step records: steps by kind, the sum of step and forward ms, the
    median decode step."""
    kinds: dict[str, int] = {}
    for r in records:
        kinds[r["forward"]] = kinds.get(r["forward"], 0) + 1
    decode = [r["ms"] for r in records if r["forward"] == Forward.DECODE]
    return {"steps": len(records), "kinds": kinds, "step_ms_sum": sum(r["ms"] for r in records),
            "forward_ms_sum": sum(r["forward_ms"] for r in records),
            "median_decode_step_ms": statistics.median(decode) if decode else None,
            "max_rows": max((sum(1 for c in r["slots"] if c["request"]) for r in records), default=0)}


def live_records(base: str) -> list[dict]:
    return get_json(base + "/api/live", timeout=30)["records"]


def lane_side(engine: Engine, workload) -> dict:
    t0 = time.perf_counter()
    run = engine.start(workload, ["continuous"])
    run.run_to_end()
    call_s = time.perf_counter() - t0
    lane = run.lanes["continuous"]
    m = lane_metrics(lane.records, run.workload)
    outs = [list(r.output_ids) for r in lane.requests]
    return {"steps_summary": step_summary([r.to_dict() for r in lane.records]), "tokens": m["tokens"],
            "lane_s": m["wall_s"], "lane_call_s": call_s, "steps": m["steps"],
            "tokens_per_s": m["tokens"] / m["wall_s"], "tokens_per_s_call": m["tokens"] / call_s,
            "texts": [engine.lm.decode(ids, skip_special_tokens=True) for ids in outs]}


def api_side(client, model: str, mix: list[dict], base: str) -> dict:
    before = max((r["step"] for r in live_records(base)), default=0)
    figures, results = run_rate(client, model, mix, float("inf"))
    time.sleep(0.3)  # the last step's record lands after its tokens went out
    steps = [r for r in live_records(base) if r["step"] > before]
    if figures["failed"]:
        raise RuntimeError(f"{figures['failed']} API requests failed: {figures.get('errors')}")
    first_send = min(r["send"] for r in results)
    last_chunk = max(r["chunks"][-1] for r in results)
    last_end = max(r["end"] for r in results)
    tokens = sum(r["tokens"] for r in results)
    return {"steps_summary": step_summary(steps), "tokens": tokens, "api_s": last_chunk - first_send,
            "api_end_s": last_end - first_send,
            "tokens_per_s": tokens / (last_chunk - first_send), "tokens_per_s_end": tokens / (last_end - first_send),
            "median_ttft_ms": figures["median_ttft_ms"], "median_itl_ms": figures["median_itl_ms"],
            "prompt_tokens": [r["prompt_tokens"] for r in results], "texts": [r["text"] for r in results]}


def bench_http(url: str | None = None, requests: int = 16, max_tokens: int = 32, slots: int = 16, repeats: int = 3,
               model_path: str | None = None, lm=None) -> dict:
    from engine.worker.model import load_model
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(requests)]
    mix = [{"prompt": p, "max_tokens": max_tokens} for p in prompts]
    load_before = os.getloadavg()[0]
    lm = lm or load_model(model_path)
    engine = Engine(lm, CLI_LIMITS)
    workload = engine.prepare(parse_workload({"name": "http-saturation", "slots": slots, "requests": [
        {"id": f"R{i}", "prompt": p, "max_new_tokens": max_tokens, "ignore_eos": True} for i, p in enumerate(prompts)]},
        CLI_LIMITS))
    lane_prompt_tokens = [len(s.prompt_ids) for s in workload.requests]
    with server(url, ["--model", model_path] if model_path and not url else None) as base:
        client = make_client(base)
        model = client.models.list().data[0].id
        log("warm-up: one run of each side")
        api_side(client, model, mix, base)
        lane_side(engine, workload)
        reps = []
        for i in range(repeats):
            pair = {}
            for name in (("api", "lane") if i % 2 == 0 else ("lane", "api")):
                pair[name] = api_side(client, model, mix, base) if name == "api" else lane_side(engine, workload)
            a, b = pair["api"], pair["lane"]
            rep = {"first": "api" if i % 2 == 0 else "lane",
                   "api_tokens_per_s": a["tokens_per_s"], "lane_tokens_per_s": b["tokens_per_s"],
                   "ratio": a["tokens_per_s"] / b["tokens_per_s"],
                   "api_tokens": a["tokens"], "lane_tokens": b["tokens"], "api_s": a["api_s"],
                   "api_end_s": a["api_end_s"],
                   "lane_s": b["lane_s"], "lane_call_s": b["lane_call_s"], "lane_steps": b["steps"],
                   "api_tokens_per_s_to_stream_end": a["tokens_per_s_end"],
                   "lane_tokens_per_s_call": b["tokens_per_s_call"],
                   "api_median_ttft_ms": a["median_ttft_ms"], "api_median_itl_ms": a["median_itl_ms"],
                   "prompt_tokens_match": a["prompt_tokens"] == lane_prompt_tokens,
                   "texts_match": sum(x == y for x, y in zip(a["texts"], b["texts"])),
                   # the share of each side's wall time spent outside its steps (waiting for arrivals, HTTP, SSE):
                   # what the HTTP path adds apart from any difference in the model's speed
                   "api_outside_steps": 1 - a["steps_summary"]["step_ms_sum"] / 1000 / a["api_s"],
                   "lane_outside_steps": 1 - b["steps_summary"]["step_ms_sum"] / 1000 / b["lane_s"],
                   "api_step_summary": a["steps_summary"], "lane_step_summary": b["steps_summary"]}
            log(f"repeat {i + 1}: api {rep['api_tokens_per_s']:.1f} tok/s, lane {rep['lane_tokens_per_s']:.1f} tok/s, "
                f"ratio {rep['ratio']:.3f}")
            reps.append(rep)
    return {"requests": requests, "max_tokens": max_tokens, "slots": slots, "model": model,
            "url": url or "started here", "repeats": reps,
            "median_api_tokens_per_s": statistics.median(r["api_tokens_per_s"] for r in reps),
            "median_lane_tokens_per_s": statistics.median(r["lane_tokens_per_s"] for r in reps),
            "median_ratio": statistics.median(r["ratio"] for r in reps),
            "http_cost": 1 - statistics.median(r["ratio"] for r in reps),
            "median_api_outside_steps": statistics.median(r["api_outside_steps"] for r in reps),
            "median_api_decode_step_ms": statistics.median(r["api_step_summary"]["median_decode_step_ms"]
                                                           for r in reps),
            "median_lane_decode_step_ms": statistics.median(r["lane_step_summary"]["median_decode_step_ms"]
                                                            for r in reps),
            "lane_prompt_tokens": lane_prompt_tokens,
            "meta": {"load_avg_before": load_before, "load_avg_after": os.getloadavg()[0], "cpus": os.cpu_count()}}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", help="a running server (default: start `python -m app` here and stop it after)")
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--slots", type=int, default=16, help="the lane's slots (the server's live lane has 16)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", help="a local model folder or .gguf, for both sides (default: the engine's default)")
    args = p.parse_args(argv)
    out = bench_http(args.url, args.requests, args.max_tokens, args.slots, args.repeats, args.model)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
