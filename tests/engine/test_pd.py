"""P/D lanes (engine/disaggregation.py): prefill engines compute prompts and first tokens, each request's KV blocks are
copied into a decode engine's pool, which runs decode steps only. The tokens stay the colocated continuous lane's (the
tiny model through a real shared-memory copy; the real model on the mixed demo); every transfer moves blocks x block
bytes; the five TTFT parts add up to the TTFT; the preset's lesson holds on the simulator; bad options name the field."""
import json

import pytest

from engine import Engine
from engine.step import SlotState
from engine.report.metrics import run_metrics
from engine.workload.workload import CLI_LIMITS, Limits, WorkloadError, parse_workload
from tests.kit import ROOT

PD = {"name": "P/D", "policy": "continuous", "disaggregation": {"prefill": 1, "decode": 1}}
PD_CHUNKED = {"name": "P/D 2+2 chunked", "policy": "continuous", "chunk_size": 16,
              "disaggregation": {"prefill": 2, "decode": 2}}


def run_demo(lm, name: str, lanes: list, **changes):
    obj = {**json.loads((ROOT / "demos" / f"{name}.json").read_text()), "lanes": lanes, **changes}
    engine = Engine(lm)
    workload = engine.prepare(parse_workload(obj, CLI_LIMITS))
    run = engine.start(workload)
    run.run_to_end()
    return run, run_metrics(run.records(), workload)


def tokens_of(run) -> dict[str, dict[str, list[int]]]:
    return {name: {r.id: r.output_ids for r in lane.requests} for name, lane in run.lanes.items()}


def check_pd_records(run, name: str) -> None:
    """Decode engines run decode rows only; every request handed off once, its bytes blocks x block bytes, its
    blocks on both sides as many as its prompt needs."""
    lane = run.lanes[name]
    roles = lane.records[0].roles
    block_bytes = lane.channel.block_bytes
    for record in lane.records:
        for role, rec in zip(roles, record.replicas):
            if role == "decode" and rec is not None:
                assert all(c.state in (SlotState.DECODE, SlotState.IDLE) for c in rec.slots)
    moved = [t for r in lane.records for t in r.transfers]
    assert len({t.request for t in moved}) == len(moved)
    size = lane.prefill[0].scheduler.blocks.block_size
    prompts = {s.id: len(s.prompt_ids) for s in run.workload.requests}
    for t in moved:
        assert t.bytes == t.blocks * block_bytes and t.blocks == len(t.src) == len(t.dst) == -(-prompts[t.request] // size)


@pytest.mark.parametrize("demo", ["mixed", "long-prompt"])
def test_pd_lanes_keep_the_colocated_lanes_tokens_on_the_tiny_model(tiny, demo):
    run, metrics = run_demo(tiny, demo, ["continuous", PD, PD_CHUNKED], kv_block_size=8)
    got = tokens_of(run)
    assert got["P/D"] == got["continuous"] == got["P/D 2+2 chunked"]
    for name in ("P/D", "P/D 2+2 chunked"):
        check_pd_records(run, name)
        assert {t.through for r in run.lanes[name].records for t in r.transfers} == {"shared_memory"}
        assert {rid: q["token_ids"] for rid, q in metrics[name]["requests"].items()} == \
            {rid: q["token_ids"] for rid, q in metrics["continuous"]["requests"].items()}
    assert run.lanes["P/D"].channel.bytes_moved == sum(t.bytes for r in run.lanes["P/D"].records for t in r.transfers)


def test_the_five_ttft_parts_add_up_to_each_requests_ttft():
    run, metrics = run_demo(None, "pd-vs-colocated", ["continuous", PD, PD_CHUNKED])
    for name in ("P/D", "P/D 2+2 chunked"):
        for rid, q in metrics[name]["requests"].items():
            parts = q["ttft_parts"]
            assert list(parts) == ["prefill_queue", "prefill", "transfer", "decode_queue", "first_decode"]
            assert all(v >= 0 for v in parts.values()), (rid, parts)
            assert sum(parts.values()) == pytest.approx(q["ttft_ms"], abs=0.01)
            assert parts["transfer"] == q["transfer"]["ms"] > 0 and q["transfer"]["bytes"] > 0


def test_pd_vs_colocated_preset_decoders_never_stall_and_first_tokens_come_later():
    """The preset's lesson, checked on its simulated run: P/D's ITL p99 is its plain decode step while colocated
    lanes stall (whole prompt worst, chunks less), and P/D's first tokens come later by the transfer and the queue."""
    run, m = run_demo(None, "pd-vs-colocated", json.loads((ROOT / "demos" / "pd-vs-colocated.json").read_text())["lanes"])
    pd, whole, chunked = m["P/D 1+1"], m["continuous"], m["chunked 64"]
    assert pd["p99_itl_ms"] < chunked["p99_itl_ms"] < whole["p99_itl_ms"]
    assert pd["p99_itl_ms"] == pd["p50_itl_ms"]  # no decode step of P/D's holds a prompt
    assert pd["p50_ttft_ms"] > whole["p50_ttft_ms"]
    d1 = pd["requests"]["D1"]["ttft_parts"]
    assert pd["requests"]["D1"]["ttft_ms"] - whole["requests"]["D1"]["ttft_ms"] == \
        pytest.approx(d1["transfer"] + d1["decode_queue"] + d1["first_decode"], abs=0.01)


@pytest.mark.parametrize("lane, field", [
    ({"disaggregation": {"prefill": 0, "decode": 1}}, "lanes[0].disaggregation.prefill"),
    ({"disaggregation": {"prefill": 1, "decode": 9}}, "lanes[0].disaggregation.decode"),
    ({"disaggregation": {"prefill": 1, "decoders": 1}}, "lanes[0].disaggregation.decoders"),
    ({"disaggregation": [1, 1]}, "lanes[0].disaggregation"),
    ({"policy": "static", "disaggregation": {}}, "lanes[0].disaggregation"),
    ({"data_parallel_size": 2, "router": "round_robin", "disaggregation": {}}, "lanes[0].data_parallel_size"),
    ({"kv_budget": 256, "disaggregation": {}}, "lanes[0].kv_budget"),
    ({"engine": "vllm", "disaggregation": {"prefill": 1, "decode": 2}}, "lanes[0].disaggregation.decode"),  # a pair
])
def test_bad_disaggregation_options_name_the_field(lane, field):
    raw = {"requests": [{"id": "A", "prompt": "hi", "max_new_tokens": 2}],
           "lanes": [{"name": "pd", "policy": "continuous", **lane}]}
    with pytest.raises(WorkloadError) as e:
        parse_workload(raw, CLI_LIMITS)
    assert e.value.field == field, str(e.value)
    off = Limits(**{**CLI_LIMITS.__dict__, "fleets": False})
    with pytest.raises(WorkloadError, match="off on this server"):
        parse_workload({**raw, "lanes": [PD]}, off)


@pytest.mark.model
def test_pd_lane_keeps_the_real_models_tokens_on_the_mixed_demo(smol):
    run, _ = run_demo(smol, "mixed", ["continuous", PD])
    got = tokens_of(run)
    assert got["P/D"] == got["continuous"]
    check_pd_records(run, "P/D")
