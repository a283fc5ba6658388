"""A real vLLM P/D pair beside colocated vLLM and our continuous lane, on demos' requests (issue 36, item 2); with
--figures, the closing note's figures (issue 36's Done-when) in one JSON.

    .venv/bin/python -m scripts.vllm_pd [demos/mixed.json demos/long-prompt.json] [--json OUT]
    .venv/bin/python -m scripts.vllm_pd --figures [--no-vllm] [--json OUT]

--figures: one run of demos/pd-vs-colocated.json on the real model with its lanes (continuous, chunked 64, P/D 1+1)
beside colocated vLLM (32-token blocks) and the vLLM P/D pair (unless --no-vllm): each lane's ITL p50/p99, TTFT p50,
wall, copies (blocks, bytes, ms, ms per block), TTFT parts and placement; then our transfer's ms per block against
recompute (the P/D lane's prefill part over its blocks, for the two long prompts: prefill ms for a block's tokens)
and swap (demos/swap-vs-recompute.json's swap lane: its copy ms over the blocks it swapped out, each out and back
in); the load before, between and after.

For each workload: (1) our continuous lane and a colocated vLLM lane (one engine, 32-token blocks like the pair's) in
one `Engine` run, lockstep; (2) the pair (engine/peers/vllm_pair.py): every request handed to the prefill engine at
once (arrivals are not replayed: greedy float32 tokens do not depend on them), one prefill step then one decode step
while either has work. Prints, per request, whether the decode side's tokens equal colocated vLLM's and ours (else
the first differing position), and what the connector moved (files, bytes, tokens) and the ms it spent saving and
loading inside the engines' forwards. Figures are one run on a shared machine: the load is printed.
"""
import argparse
import json
import os
import time
from dataclasses import replace

from engine import Engine, parse_workload
from engine.workload.workload import CLI_LIMITS
from engine.peers.vllm_pair import PAIR_BLOCK, PairRequest, VllmPair
from engine.peers.vllm_process import close_all
from engine.worker.model import load_model

KV_BYTES_PER_TOKEN = 46_080   # SmolLM2 float32: 2 (K, V) x 30 layers x 3 heads x 64 x 4 bytes


def load() -> str:
    return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg())


def colocated(engine: Engine, workload: dict) -> tuple[list, dict]:
    """Our continuous lane and a colocated vLLM lane on the workload: its prepared requests and {lane: {id: tokens}}."""
    lanes = ["continuous", {"name": "vLLM", "engine": "vllm", "kv_block_size": PAIR_BLOCK}]
    wl = engine.prepare(parse_workload({**workload, "lanes": lanes}))
    run = engine.start(wl)
    run.run_to_end()
    return list(wl.requests), {name: {r.id: list(r.output_ids) for r in lane.requests} for name, lane in run.lanes.items()}


def through_pair(pair: VllmPair, specs: list) -> tuple[dict, dict]:
    """Every request through the pair in lockstep; its requests by id and the engines' totals."""
    pair.clear()
    reqs = {f"r{i}": PairRequest(f"r{i}", list(s.prompt_ids), s.max_new_tokens, s.ignore_eos) for i, s in enumerate(specs)}
    for r in reqs.values():
        pair.add(r)
    totals = {e: {"steps": 0, "ms": 0.0, "save_ms": 0.0, "load_ms": 0.0} for e in ("prefill", "decode")}
    while any(r.finish is None for r in reqs.values()):
        for engine, busy in (("prefill", lambda r: not r.handed_off), ("decode", lambda r: r.handed_off)):
            if any(busy(r) and r.finish is None for r in reqs.values()):
                answer = pair.step(reqs, engine)
                t = totals[engine]
                t["steps"] += 1
                t["ms"] += answer["ms"]
                t["save_ms"] += answer.get("kv_io", {}).get("save_ms", 0.0)
                t["load_ms"] += answer.get("kv_io", {}).get("load_ms", 0.0)
    return {s.id: reqs[f"r{i}"] for i, s in enumerate(specs)}, totals


def first_difference(a: list[int], b: list[int]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))


def report(name: str, specs: list, lanes: dict, reqs: dict, totals: dict) -> dict:
    rows, moved = [], {"files": 0, "bytes": 0, "file_bytes": 0, "tokens": 0}
    for s in specs:
        r = reqs[s.id]
        row = {"id": s.id, "prompt": len(s.prompt_ids), "tokens": len(r.output_ids), "saved": r.saved, "loaded": r.loaded,
               "vs_vllm": first_difference(r.output_ids, lanes["vLLM"][s.id]),
               "vs_ours": first_difference(r.output_ids, lanes["continuous"][s.id])}
        if r.loaded:
            assert r.loaded["bytes"] == r.loaded["tokens"] * KV_BYTES_PER_TOKEN, row   # full blocks x bytes per token
            for k in moved:
                moved[k] += r.loaded[k]
        rows.append(row)
        print(f"  {s.id:>6} prompt {row['prompt']:4d}  out {row['tokens']:3d}  saved {r.saved.get('tokens', 0):4d} tok "
              f"loaded {r.loaded.get('tokens', 0):4d} tok ({r.loaded.get('files', 0)} files, {r.loaded.get('bytes', 0):,} B)"
              f"  = colocated vLLM: {'yes' if row['vs_vllm'] is None else 'NO at ' + str(row['vs_vllm'])}"
              f"  = ours: {'yes' if row['vs_ours'] is None else 'NO at ' + str(row['vs_ours'])}")
    print(f"  moved {moved['files']} files, {moved['bytes']:,} B of K/V ({moved['file_bytes']:,} B on /dev/shm), "
          f"{moved['tokens']} tokens; save {totals['prefill']['save_ms']:.1f} ms in {totals['prefill']['steps']} prefill "
          f"steps ({totals['prefill']['ms']:.0f} ms), load {totals['decode']['load_ms']:.1f} ms in "
          f"{totals['decode']['steps']} decode steps ({totals['decode']['ms']:.0f} ms)")
    return {"workload": name, "requests": rows, "moved": moved, "engines": totals}


LANE_KEYS = ("p50_itl_ms", "p99_itl_ms", "p50_ttft_ms", "wall_s")


def closing_figures(engine: Engine, with_vllm: bool, records_to: str | None = None) -> dict:
    """The closing note's figures, one run each (see the module's docstring); `records_to`: write the vLLM P/D
    lane's records, the workload and Python's metrics of them there (the page's fixture of a real pair)."""
    from engine.report.metrics import run_metrics
    from scripts.bench_memory import lane_figures

    out = {"load": {"start": load()}}
    # swap (first: a mistake shows in seconds): the swap lane of swap-vs-recompute, each swapped-out block out and in
    swap_wl = engine.prepare(parse_workload(json.loads(open("demos/swap-vs-recompute.json").read()), CLI_LIMITS))
    swap_run = engine.start(replace(swap_wl, lanes=tuple(lane for lane in swap_wl.lanes if lane.name == "swap")))
    swap_run.run_to_end()
    recs = [r.to_dict() for r in swap_run.records()["swap"]]
    swap = lane_figures(recs, run_metrics({"swap": recs}, swap_wl)["swap"])
    preset = json.loads(open("demos/pd-vs-colocated.json").read())
    if with_vllm:
        preset["lanes"] = preset["lanes"] + [{"name": "vLLM", "engine": "vllm", "kv_block_size": PAIR_BLOCK},
                                             {"name": "vLLM P/D", "engine": "vllm",
                                              "disaggregation": {"prefill": 1, "decode": 1}}]
    wl = engine.prepare(parse_workload(preset, CLI_LIMITS))
    run = engine.start(wl)
    run.run_to_end()
    metrics = run_metrics(run.records(), wl)
    tokens = {name: {r.id: list(r.output_ids) for r in lane.requests} for name, lane in run.lanes.items()}
    out["load"]["after_preset"] = load()
    if records_to and with_vllm:
        pair = [r.to_dict() for r in run.records()["vLLM P/D"]]
        open(records_to, "w").write(json.dumps({"workload": wl.to_dict(), "records": pair,
                                                "metrics": run_metrics({"vLLM P/D": pair}, wl)["vLLM P/D"]}))
    lanes = {}
    for name, m in metrics.items():
        lanes[name] = {k: m.get(k) for k in LANE_KEYS}
        lanes[name]["same_tokens_as_continuous"] = tokens[name] == tokens["continuous"]
        if m.get("pd"):
            pd = m["pd"]
            lanes[name]["copies"] = {k: pd[k] for k in ("transfers", "blocks", "bytes", "ms", "ms_per_block",
                                                        "through")}
            lanes[name]["ttft_parts"] = {rid: q["ttft_parts"] for rid, q in m["requests"].items()}
        if m.get("placement"):
            lanes[name]["placement"] = m["placement"]
    out["pd_vs_colocated"] = lanes
    # recompute: the P/D lane's prefill of each long prompt, per block of its tokens
    ours = metrics["P/D 1+1"]["requests"]
    longs = [q for q in ours.values() if q["transfer"] and q["transfer"]["blocks"] >= 8]
    recompute = [q["ttft_parts"]["prefill"] / q["transfer"]["blocks"] for q in longs]
    out["per_block_ms"] = {
        "transfer_ours": metrics["P/D 1+1"]["pd"]["ms_per_block"],
        "transfer_vllm_pair": metrics["vLLM P/D"]["pd"]["ms_per_block"] if with_vllm else None,
        "recompute": sum(recompute) / len(recompute) if recompute else None,
        "recompute_from": f"{len(longs)} long prompts: prefill part / their blocks ({PREFILL_BLOCK}-token blocks)",
        "swap_out_and_in": swap["copy_ms"] / swap["blocks_swapped_out"] if swap["blocks_swapped_out"] else None,
        "swap_from": {k: swap[k] for k in ("blocks_swapped_out", "copy_ms", "swaps")}}
    out["load"]["end"] = load()
    return out


PREFILL_BLOCK = 16   # our engines' KV block (EngineConfig.kv_block_size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="*", default=["demos/mixed.json", "demos/long-prompt.json"])
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--figures", action="store_true", help="the closing note's figures (see above), one JSON")
    ap.add_argument("--no-vllm", action="store_true", help="with --figures: our lanes only")
    ap.add_argument("--records", help="with --figures: write the vLLM P/D lane's records, workload and metrics here")
    args = ap.parse_args()
    if args.figures:
        figures = closing_figures(Engine(load_model(dtype="float32", device="cpu")), not args.no_vllm, args.records)
        close_all()
        text = json.dumps(figures, indent=1)
        print(text)
        if args.json:
            open(args.json, "w").write(text)
        return
    print(f"start: {load()}")
    engine = Engine(load_model(dtype="float32", device="cpu"))
    ours = {}
    for path in args.workloads:
        ours[path] = colocated(engine, json.loads(open(path).read()))
    close_all()   # colocated vLLM's warm bridge: one vLLM's memory at a time beside the pair
    print(f"colocated runs done: {load()}")
    t0 = time.perf_counter()
    slots = max(json.loads(open(p).read()).get("slots", 4) for p in args.workloads)
    pair = VllmPair(str(engine.lm.folder), {"max_num_seqs": slots, "max_model_len": 2048})
    print(f"pair started in {time.perf_counter() - t0:.1f} s (connector folder {pair.storage}): {load()}")
    out = []
    try:
        for path in args.workloads:
            specs, lanes = ours[path]
            print(f"{path}:")
            reqs, totals = through_pair(pair, specs)
            out.append(report(path, specs, lanes, reqs, totals))
    finally:
        pair.close()
    print(f"end: {load()}")
    if args.json:
        open(args.json, "w").write(json.dumps({"load": load(), "runs": out}, indent=1))


if __name__ == "__main__":
    main()
