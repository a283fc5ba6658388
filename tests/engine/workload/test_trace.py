"""Replaying production traces (engine/workload/trace.py, engine/workload/trace_text.py) on the simulator: the same slice and scales give
the same workload; time scaling keeps order and relative gaps; equal hash ids give equal prompt blocks and unequal ids
different ones; the prefix cache's hit ratio equals the ratio the hash ids give; the presets and sweeps over a slice.
The real model's side is tests/engine/workload/test_trace_model.py."""
import contextlib
import io
import json
import statistics

import pytest

from engine import Engine, lane_metrics, parse_workload
from engine.cli.commands import main
from engine.limits import CLI_LIMITS, Limits, WorkloadError
from engine.worker.sim import sim_prompt_ids
from engine.report.sweep import offered_rate, run_sweep
from engine.workload.trace import (SLICES, check_spec, hash_hit_ratio, read_trace, slice_rows, trace_blocks, trace_workload)
from tests.kit import ROOT

AZURE, MOONCAKE = SLICES / "azure-code-burst.csv", SLICES / "mooncake-conversation.jsonl"
B = 32  # 512 x 0.0625


def spec(file=MOONCAKE, **kw) -> dict:
    return {"file": str(file), "window": "0:6", "time_scale": 1, "length_scale": 0.0625, **kw}


def make(file=MOONCAKE, limits=CLI_LIMITS, **kw) -> dict:
    return trace_workload(read_trace(file), check_spec(spec(file, **kw)), limits)


def cli(*args) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0
    return out.getvalue()


def test_the_same_slice_and_scales_give_the_same_workload_and_the_description_says_them():
    args = ("trace", str(AZURE), "--window", "0:60", "--time-scale", "0.5", "--length-scale", "0.0625", "--seed", "3")
    first, again = cli(*args), cli(*args)
    assert first == again
    w = json.loads(first)
    assert len(w["requests"]) == 31 and all(r["ignore_eos"] for r in w["requests"])
    assert "seconds 0-60" in w["description"] and "Times x0.5" in w["description"]
    assert "prompt lengths x0.0625" in w["description"] and "output lengths x0.0625" in w["description"]
    other = json.loads(cli(*args[:-1], "4"))  # another seed: other words, the same lengths and times
    assert [r["prompt"] for r in other["requests"]] != [r["prompt"] for r in w["requests"]]
    assert [(r["arrival_ms"], r["max_new_tokens"], len(r["prompt"])) for r in other["requests"]] == \
        [(r["arrival_ms"], r["max_new_tokens"], len(r["prompt"])) for r in w["requests"]]


def test_time_scaling_keeps_the_order_and_the_relative_gaps():
    rows = read_trace(AZURE)
    one, quarter = make(AZURE, window="0:60"), make(AZURE, window="0:60", time_scale=0.25)
    t1 = [r["arrival_ms"] for r in one["requests"]]
    tq = [r["arrival_ms"] for r in quarter["requests"]]
    assert t1 == sorted(t1) and tq == sorted(tq)
    assert [r["prompt"] for r in one["requests"]] == [r["prompt"] for r in quarter["requests"]]
    assert t1 == pytest.approx([round(r.t_ms - rows[0].t_ms, 1) for r in rows], abs=0.06)  # the recorded gaps
    assert tq == pytest.approx([t / 4 for t in t1], abs=0.1)
    gaps = lambda ts: [b - a for a, b in zip(ts, ts[1:])]
    cv = lambda ts: statistics.pstdev(gaps(ts)) / statistics.mean(gaps(ts))
    assert cv(tq) == pytest.approx(cv(t1), rel=1e-3)  # the burstiness kept
    assert "30.03/s here" in quarter["description"] and "7.51/s as recorded" in quarter["description"]


def test_lengths_are_scaled_and_cut_to_the_limits_which_the_description_counts():
    rows = read_trace(AZURE)
    w = make(AZURE, window="0:60", output_scale=0.25)
    assert [r["max_new_tokens"] for r in w["requests"]] == [max(1, round(r.output_tokens / 4)) for r in rows]
    sims = [len(sim_prompt_ids(r["prompt"])) for r in w["requests"]]
    assert sims == [max(31, round(r.prompt_tokens / 16)) for r in rows]  # prompt tokens on the simulator
    cut = make(AZURE, limits=Limits(), window="0:60", length_scale=0.5)
    assert "prompts cut to 1018 tokens" in cut["description"]
    parse_workload(cut, Limits())  # within the page's limits


def test_equal_hash_ids_give_equal_prompt_blocks_and_unequal_ids_different_ones_on_the_simulator():
    rows = slice_rows(read_trace(MOONCAKE), check_spec(spec()))
    w = make()
    assert w["kv_block_size"] == B
    ids = [sim_prompt_ids(r["prompt"]) for r in w["requests"]]
    blocks = {}  # (hash id, depth==0) -> its token block
    pairs = 0
    for row, toks, (kept, n) in zip(rows, ids, trace_blocks(rows, check_spec(spec()), 10**6)):
        assert len(toks) == n
        for i, h in enumerate(kept):
            if (i + 1) * B > n:
                break  # the last block is cut short
            block = tuple(toks[i * B:(i + 1) * B])
            key = (h, i == 0)
            assert blocks.setdefault(key, block) == block  # equal ids, equal blocks
            pairs += 1
    by_block = {}
    for key, block in blocks.items():
        assert by_block.setdefault(block, key) == key  # unequal ids, different blocks
    assert pairs > len(blocks) > 40  # ids repeat (id 0 opens every prompt), and many differ


def test_the_prefix_cache_hit_ratio_equals_the_ratio_its_hash_ids_give_on_the_simulator():
    """One request at a time (1 slot, room for every block): the cache finds what the hash ids say, less only what
    the last partial block and the last prompt token (always computed) make it miss."""
    sp = check_spec(spec(window="0:30"))
    rows = slice_rows(read_trace(MOONCAKE), sp)
    blocks = trace_blocks(rows, sp, 10**6)
    obj = {**make(window="0:30"), "slots": 1, "kv_budget": 65536,
           "lanes": [{"name": "prefix cache", "policy": "continuous", "prefix_cache": True}]}
    engine = Engine(None, CLI_LIMITS)
    run = engine.start(engine.prepare(parse_workload(obj, CLI_LIMITS)))
    run.run_to_end()
    m = lane_metrics(run.lanes["prefix cache"].records, run.workload)
    assert m["prompt_tokens_computed"] + m["prompt_tokens_cached"] == sum(n for _, n in blocks)
    assert m["prefix_cache_hit_rate"] == pytest.approx(hash_hit_ratio(blocks, B, as_cache=True), abs=1e-12)
    trace_ratio = hash_hit_ratio(blocks, B)
    last = sum(n - (len(ids) - 1) * B for ids, n in blocks) / sum(n for _, n in blocks)  # every last block's share
    assert trace_ratio - last <= m["prefix_cache_hit_rate"] <= trace_ratio
    assert m["prefix_cache_hit_rate"] > 0.1


def test_a_trace_section_is_refused_by_field():
    cases = [({"window": "6:1"}, "trace.window"), ({"window": "soon"}, "trace.window"),
             ({"length_scale": 0.05}, "trace.length_scale"), ({"time_scale": None, "rate": None}, "trace.time_scale"),
             ({"rate": 2}, "trace.time_scale"), ({"speed": 2}, "trace.speed"), ({"window": "100:200"}, "trace.window")]
    for change, where in cases:
        obj = {"trace": {k: v for k, v in {**spec(), "file": MOONCAKE.name, **change}.items() if v is not None}}
        with pytest.raises(WorkloadError) as e:
            parse_workload(obj, Limits())
        assert e.value.field == where, change
    for bad in ("../../etc/passwd", str(MOONCAKE), "nope.csv"):
        with pytest.raises(WorkloadError) as e:
            parse_workload({"trace": {**spec(), "file": bad}}, Limits())
        assert e.value.field == "trace.file" and "azure-code-burst.csv" in str(e.value)
    with pytest.raises(WorkloadError) as e:
        parse_workload({"trace": {**spec(AZURE), "file": AZURE.name, "window": "0:60"}}, Limits(max_requests=8))
    assert e.value.field == "trace.limit"
    with pytest.raises(WorkloadError) as e:
        parse_workload({"trace": {**spec(), "file": MOONCAKE.name}, "kv_block_size": 16}, Limits())
    assert e.value.field == "kv_block_size"


@pytest.mark.parametrize("name", ["azure-code-burst", "mooncake-conversation"])
def test_the_trace_presets_fit_the_pages_limits_and_run_on_the_simulator(name):
    obj = json.loads((ROOT / "demos" / f"{name}.json").read_text())
    engine = Engine(None, Limits())
    workload = engine.prepare(parse_workload(obj, Limits()))
    assert workload.description == obj["description"] and workload.timed
    run = engine.start(workload)
    run.run_to_end()
    assert all(lane.done for lane in run.lanes.values())


def test_the_mooncake_lesson_states_the_slices_own_hash_id_ratio():
    obj = json.loads((ROOT / "demos" / "mooncake-conversation.json").read_text())
    sp = check_spec({**obj["trace"], "file": str(MOONCAKE)})
    ratio = hash_hit_ratio(trace_blocks(slice_rows(read_trace(MOONCAKE), sp), sp, 10**6), B)
    assert f"the hash ids give {ratio:.2f}," in obj["description"] and "about 0.40" in obj["description"]


def test_a_sweep_over_a_trace_slice_compresses_its_time_to_each_rate_and_keeps_its_burstiness():
    obj = {"slots": 4, "lanes": ["continuous"],
           "trace": {"file": AZURE.name, "window": "0:60", "time_scale": 1, "length_scale": 0.03, "output_scale": 0.1}}
    result = run_sweep(Engine(None, CLI_LIMITS), obj, [2.0, 8.0], CLI_LIMITS)
    assert [p["offered_rate"] for p in result["points"]] == pytest.approx([2.0, 8.0])
    assert all(p["lanes"]["continuous"]["completed"] == 31 for p in result["points"])
    at = lambda rate: {k: v for k, v in {**obj["trace"], "rate": rate}.items() if k != "time_scale"}
    slow, fast = (parse_workload({**obj, "trace": at(rate)}) for rate in (2.0, 8.0))
    assert offered_rate(slow) == pytest.approx(2.0) and offered_rate(fast) == pytest.approx(8.0)
    assert [r.arrival_ms / 4 for r in slow.requests] == pytest.approx([r.arrival_ms for r in fast.requests], abs=0.1)
    assert [r.prompt for r in slow.requests] == [r.prompt for r in fast.requests]
    with pytest.raises(WorkloadError) as e:
        run_sweep(Engine(None, CLI_LIMITS), obj, [2.0], CLI_LIMITS, burstiness=0.5)
    assert e.value.field == "burstiness"


def test_the_cli_sweeps_a_trace_workload(tmp_path):
    path = tmp_path / "burst.json"
    path.write_text(json.dumps({"slots": 4, "lanes": ["static", "continuous"], "trace": {
        "file": AZURE.name, "window": "0:60", "time_scale": 1, "length_scale": 0.03, "output_scale": 0.1}}))
    out = json.loads(cli("sweep", str(path), "--backend", "sim", "--rates", "1,4", "--json"))
    assert [p["offered_rate"] for p in out["points"]] == pytest.approx([1.0, 4.0])


def test_the_editor_replays_a_shipped_slice_through_api_generate_and_a_bad_field_is_a_400_naming_it(make_app):
    client = make_app({"LIVE_SLOTS": 1}, engine=Engine(None)).test_client()
    assert client.get("/api/limits").get_json()["traces"] == ["azure-code-burst.csv", "mooncake-conversation.jsonl"]
    trace = {"file": MOONCAKE.name, "window": "0:6", "time_scale": 2, "length_scale": 0.0625, "limit": 10}
    body = client.post("/api/generate", json={"trace": trace}).get_json()
    assert body["requests"] == make(time_scale=2, limit=10, limits=Limits())["requests"]
    assert body["workload"]["kv_block_size"] == 32 and "(the first 10)" in body["workload"]["description"]
    for change, where in (({"file": "../demos/mixed.json"}, "trace.file"), ({"length_scale": 0.01}, "trace.length_scale"),
                          ({"limit": 0}, "trace.limit")):
        r = client.post("/api/generate", json={"trace": {**trace, **change}})
        assert r.status_code == 400 and r.get_json()["field"] == where
    presets = {p["name"]: p for p in client.get("/api/presets").get_json()["presets"]}
    mooncake = presets["mooncake-conversation"]
    assert mooncake["kv_block_size"] == 32 and len(mooncake["requests"]) == 19 and mooncake["claims"]
    assert len(presets["azure-code-burst"]["requests"]) == 31
    # the sweep page sends a trace preset as its trace section (static/js/sweep/form.js): replayed at each rate
    sent = {k: v for k, v in mooncake.items() if k != "requests"}
    points = run_sweep(Engine(None, Limits()), sent, [1.0, 3.0], Limits())["points"]
    assert [p["offered_rate"] for p in points] == pytest.approx([1.0, 3.0])
