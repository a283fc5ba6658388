"""What a live request's time to first token is made of, request by request, from the live lane's step records
(`GET /api/live`) and the client's own TTFTs: the race's Poisson 4 shape reads it (scripts/bench_vllm.py).

    ttft_parts(snapshot, client_ttfts_ms) -> {"requests": [...], "p50": {...}, "steps": {...}}

Per request, on the lane clock (ms): `wait_step`, from its arrival to the end of the step that was running when it
arrived (a step is never interrupted); `wait_more`, any further wait until the step that admitted it started (a
prompt budget, no free slot); `prefill`, from that step's start to the end of the step that wrote its first token
(one fused step when its whole prompt fits the budget; `prefill_steps` says how many); and `http`, the client's TTFT
less the lane's (parsing, tokenizing, the SSE chunk and the client's own clock). The steps part is each kind of
step's median length by rows (decode 8, fused 9, ...). A figure, not a test: it asserts nothing.

What it does not know: which server or client made the figures; it reads records and numbers.
"""
import statistics


def ttft_parts(snapshot: dict, client_ttfts_ms: list[float]) -> dict:
    """The parts of the last len(client_ttfts_ms) requests of `snapshot` (an /api/live answer), in arrival order,
    matched to the client's TTFTs in the order the client sent them."""
    n = len(client_ttfts_ms)
    requests = sorted((r for r in snapshot["requests"] if r.get("first_token_ms") is not None),
                      key=lambda r: r["arrival_ms"])[-n:]
    steps = [(s["start_ms"], s["start_ms"] + s["ms"]) for s in snapshot["records"]]
    parts = []
    for r, client in zip(requests, client_ttfts_ms[-len(requests):]):
        arrival, admitted, first = r["arrival_ms"], r["admitted_ms"], r["first_token_ms"]
        running = next((end for start, end in steps if start <= arrival < end), arrival)
        wait_step = min(running, admitted) - arrival
        parts.append({"id": r["id"], "client_ttft": round(client, 1), "lane_ttft": round(first - arrival, 1),
                      "wait_step": round(wait_step, 1), "wait_more": round(admitted - arrival - wait_step, 1),
                      "prefill": round(first - admitted, 1),
                      "prefill_steps": sum(1 for start, end in steps if admitted <= start and end <= first + 1e-3),
                      "http": round(client - (first - arrival), 1)})
    keys = ("client_ttft", "lane_ttft", "wait_step", "wait_more", "prefill", "http")
    p50 = {k: round(statistics.median(p[k] for p in parts), 1) for k in keys} if parts else {}
    return {"requests": parts, "p50": p50, "steps": step_lengths(snapshot["records"])}


def step_lengths(records: list[dict]) -> dict[str, list]:
    """Each kind of step by its rows ("decode 8", "fused 9"): [how many, median ms]."""
    kinds: dict[str, list[float]] = {}
    for s in records:
        rows = sum(1 for c in s["slots"] if c["request"])
        kinds.setdefault(f"{s['forward']} {rows}", []).append(s["ms"])
    order = sorted(kinds, key=lambda k: (k.split()[0], int(k.split()[1])))
    return {k: [len(kinds[k]), round(statistics.median(kinds[k]), 1)] for k in order}
