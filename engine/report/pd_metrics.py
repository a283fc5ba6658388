"""A P/D lane's metrics (engine/disaggregation.py), from its step records alone.

Each engine's records are lane records: `one_lane` (metrics.lane_metrics, passed in so that the two modules import
each other in no circle) gives each engine's counts over its own requests (slot steps, prompt tokens, tokens), which
are summed. The per-request figures are the lane's own, read across the hand-off: a request arrives (its arrival_ms,
or the start of step `arrival` + 1), waits for a prefill engine, is prefilled (its first token is written at the end
of that step), its blocks are copied (the record's `transfers`), it waits in a decode engine's queue, and the decode
engine's first step for it writes its second token. The client gets its first token from the decode engine, with
the second, when that step ends (as a P/D proxy streams the decode instance's response; BLIS's accounting,
inference-sim #930/#1512), so

    TTFT = prefill queue + prefill + transfer + decode queue + first decode step          (`ttft_parts`, ms)

and its inter-token gaps are those between its decode steps (the first two tokens come together: no gap between them,
as for a speculative cell's tokens). A request that stopped on its first token (EOS, max_new_tokens 1) never leaves its
prefill engine: its TTFT is prefill queue + prefill, the other parts 0.
"""
from dataclasses import replace

from engine.report.pooled import pooled_metrics
from engine.report.stats import mean

PD_REQUEST_FIELDS = ("prefill_engine", "decode_engine", "transfer", "ttft_parts")
PARTS = ("prefill_queue", "prefill", "transfer", "decode_queue", "first_decode")


def pd_metrics(recs: list[dict], workload, one_lane) -> dict:
    roles = recs[0]["roles"]
    P = roles.count("prefill")
    lanes = [[(k, r["replicas"][i]) for k, r in enumerate(recs, 1) if r["replicas"][i] is not None]
             for i in range(len(roles))]
    routes = {route["request"]: route for r in recs for route in r["routes"]}
    transfers = {t["request"]: t for r in recs for t in r["transfers"]}
    engine_of = {rid: route["replica"] for rid, route in routes.items()}
    decoder_of = {rid: P + t["decode"] for rid, t in transfers.items()}
    parts = []
    for i, lane in enumerate(lanes):
        owner = engine_of if i < P else decoder_of
        mine = tuple(s for s in workload.requests if owner.get(s.id) == i)
        parts.append(one_lane([rec for _, rec in lane], replace(workload, requests=mine)) if lane else None)
    per = {s.id: request_figures(s, recs, lanes, engine_of.get(s.id), decoder_of.get(s.id), transfers.get(s.id),
                                 workload.timed) for s in workload.requests if s.id in engine_of}
    itl = [g for q in per.values() if q["return_step"] is not None for g in q.pop("gaps")]
    out = pooled_metrics(len(recs), parts, per, [c for lane in lanes for _, rec in lane for c in rec["slots"]], itl,
                         workload.slo)
    out.update({"mean_load_imbalance": None, "max_load_imbalance": None, "prefix_hit_rate_available": None,
                "prefix_hit_rate_achieved": None})
    out["requests"] = per
    if recs[0].get("placement"):  # a split lane's machine statement (engine/report/placement.py)
        out["placement"] = recs[0]["placement"]
    moved = list(transfers.values())
    blocks = sum(t["blocks"] for t in moved)
    out["pd"] = {"prefill": P, "decode": len(roles) - P, "transfers": len(moved), "blocks": blocks,
                 "bytes": sum(t["bytes"] for t in moved), "ms": round(sum(t["ms"] for t in moved), 3),
                 "ms_per_block": sum(t["ms"] for t in moved) / blocks if blocks else None,
                 "through": sorted({t["through"] for t in moved}),
                 **{f"mean_{part}_ms": mean([q["ttft_parts"][part] for q in per.values() if q["ttft_parts"]])
                    for part in PARTS},
                 "engines": [{"name": lane[0][1]["lane"] if lane else None, "role": role,
                              **({k: part[k] for k in ("steps", "tokens", "wall_s")} if part else {})}
                             for lane, role, part in zip(lanes, roles, parts)]}
    return out


def request_figures(spec, recs: list[dict], lanes: list, prefill: int, decode: int | None, transfer: dict | None,
                    timed: bool) -> dict:
    """One request's figures across its hand-off: its times (ms and lane steps), tokens, text and TTFT parts."""
    arrival_ms = spec.arrival_ms if timed else (recs[spec.arrival]["start_ms"] if spec.arrival < len(recs)
                                                else recs[-1]["start_ms"] + recs[-1]["ms"])
    arrival = spec.arrival if not timed else next((k - 1 for k, r in enumerate(recs, 1) if r["start_ms"] >= arrival_ms),
                                                  len(recs))
    q = {"arrival": arrival, "arrival_ms": arrival_ms, "first_token_step": None, "finish_step": None,
         "return_step": None, "admit_step": None, "token_ids": [], "text": "", "stop": None, "preemptions": 0,
         "prefill_engine": prefill, "decode_engine": transfer["decode"] if transfer else None, "transfer": None, "ttft_parts": None, "gaps": []}
    p = walk(lanes[prefill], spec.id)
    d = walk(lanes[decode], spec.id) if decode is not None else None
    q["token_ids"], q["text"] = p["tokens"] + (d["tokens"] if d else []), p["text"] + (d["text"] if d else "")
    q["admit_step"], q["stop"] = p["admit_step"], (d or p)["stop"]
    last = d if d is not None and d["returned"] is not None else p if d is None else None
    if p["first_end"] is None or last is None:  # not yet returned
        q.update({"tokens": len(q["token_ids"]), "ttft_steps": None, "latency_steps": None, "ttft_ms": None,
                  "tpot_ms": None, "latency_ms": None, "queue_ms": None})
        return q
    first = d if d is not None else p
    first_ms, first_step = (d["ends"][0], d["cell_steps"][0]) if d is not None else (p["first_end"], p["first_step"])
    q.update({"first_token_step": first_step, "finish_step": last["finished"], "return_step": last["returned"],
              "tokens": len(q["token_ids"]), "ttft_steps": first_step - arrival,
              "latency_steps": last["returned"] - arrival, "ttft_ms": first_ms - arrival_ms,
              "queue_ms": p["admit_ms"] - arrival_ms, "latency_ms": last["return_ms"] - arrival_ms})
    q["tpot_ms"] = (last["finish_ms"] - first_ms) / (q["tokens"] - 1) if q["tokens"] > 1 else None
    q["gaps"] = [b - a for a, b in zip(first["ends"], first["ends"][1:])] if d is not None else []
    parts = {"prefill_queue": p["admit_ms"] - arrival_ms, "prefill": p["first_end"] - p["admit_ms"],
             "transfer": 0.0, "decode_queue": 0.0, "first_decode": 0.0}
    if transfer is not None:
        q["transfer"] = {k: transfer[k] for k in ("blocks", "bytes", "ms", "through")}
        ready = transfer["start_ms"] + transfer["ms"]
        parts.update(transfer=transfer["ms"], decode_queue=d["admit_ms"] - ready, first_decode=d["ends"][0] - d["admit_ms"])
    q["ttft_parts"] = {k: round(v, 3) for k, v in parts.items()}
    return q


def walk(lane: list[tuple[int, dict]], rid: str) -> dict:
    """What one engine's records say of request `rid`: when it was first admitted, its token cells (their ends, in
    ms, and lane steps), when it finished and was returned; on a prefill engine, its first token's step end."""
    w = {"admit_ms": None, "admit_step": None, "tokens": [], "text": "", "ends": [], "cell_steps": [], "stop": None,
         "first_end": None, "first_step": None, "finished": None, "finish_ms": None, "returned": None,
         "return_ms": None}
    for k, rec in lane:
        end = rec["start_ms"] + rec["ms"]
        if rid in rec["admitted"] and w["admit_ms"] is None:
            w["admit_ms"], w["admit_step"] = rec["start_ms"], k
        for cell in rec["slots"]:
            if cell["request"] == rid and cell["token_id"] is not None:
                w["tokens"] += cell.get("tokens") or [cell["token_id"]]
                if (cell.get("tokens") or cell.get("stop") != "eos") and cell["token"]:
                    w["text"] += cell["token"]
                w["stop"] = cell.get("stop") or w["stop"]
                w["ends"].append(end)
                w["cell_steps"].append(k)
                if w["first_end"] is None:
                    w["first_end"], w["first_step"] = end, k
        if rid in rec["finished"]:
            w["finished"], w["finish_ms"] = k, end
        if rid in rec["returned"] and w["returned"] is None:
            w["returned"], w["return_ms"] = k, end
    return w
