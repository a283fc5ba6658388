"""A real vLLM P/D pair as a lane (engine/peers/vllm_pd_lane.py): a vLLM prefill engine and a vLLM decode engine
joined by vLLM's ExampleConnector on /dev/shm. On demos/mixed.json, in float32 and greedy, its tokens equal our
continuous lane's, request by request (and so colocated vLLM's: test_vllm_fidelity.py holds it to ours on every demo;
scripts/vllm_pd.py compares the three directly, outside the suite's budget); its records are P/D
records (prefill and decode engine records, one transfer per handed-off request whose bytes are the prompt's full
blocks of K and V, every layer) and its five TTFT parts add up to its TTFT. Needs `make vllm` (.venv-vllm): skipped
without it, a failure under CI=true or BATCH_LANES_REQUIRE_VLLM=1. Two vLLM starts (prefill, decode), at once."""
import json

import pytest

from engine import parse_workload
from engine.peers.vllm_pair import PAIR_BLOCK
from engine.peers.vllm_process import VllmError
from engine.report.metrics import lane_metrics
from tests.kit import ROOT
from tests.kit.reference import PROMPTS

pytestmark = [pytest.mark.vllm, pytest.mark.model]
PAIR = {"name": "vLLM P/D", "engine": "vllm", "disaggregation": {"prefill": 1, "decode": 1}}
KV_BYTES_PER_TOKEN = 46_080   # SmolLM2 float32: K and V x 30 layers x 3 heads x 64 x 4 bytes


def run_all(engine, workload: dict):
    run = engine.start(engine.prepare(parse_workload({**workload, "lanes": ["continuous", PAIR]})))
    run.run_to_end()
    return run


@pytest.fixture(scope="module")
def run(engine):
    return run_all(engine, json.loads(ROOT.joinpath("demos/mixed.json").read_text()))


def differences(run) -> list[str]:
    got = {name: {r.id: list(r.output_ids) for r in lane.requests} for name, lane in run.lanes.items()}
    found = []
    for spec in run.workload.requests:
        pair = got["vLLM P/D"][spec.id]
        theirs = got["continuous"][spec.id]
        if pair != theirs:
            pos = next((i for i, (a, b) in enumerate(zip(pair, theirs)) if a != b), min(len(pair), len(theirs)))
            found.append(f"request {spec.id}: the pair differs from our continuous lane at token {pos}")
    return found


def test_the_vllm_pair_writes_what_our_continuous_lane_writes(run):
    assert not differences(run)
    assert all(len(r.output_ids) == r.spec.max_new_tokens for r in run.lanes["vLLM P/D"].requests)


def test_each_handed_off_request_moved_its_prompts_full_blocks_through_the_connector(run):
    records = run.lanes["vLLM P/D"].records
    assert all(r.roles == ("prefill", "decode") for r in records)
    transfers = {t.request: t for r in records for t in r.transfers}
    for spec in run.workload.requests:
        t = transfers[spec.id]   # every mixed request has max_new_tokens > 1 and ignores EOS: all are handed off
        full = (len(spec.prompt_ids) - 1) // PAIR_BLOCK   # ExampleConnector: the full blocks of the prompt
        assert (t.blocks, t.bytes) == (full, full * PAIR_BLOCK * KV_BYTES_PER_TOKEN), spec.id
        assert t.ms > 0 and t.through == "vllm_example_connector"
    # the decode engine's first step for a request computes only what was not loaded: the tail of its prompt
    for r in records:
        for c in (r.replicas[1].slots if r.replicas[1] is not None else ()):
            if c.prefill is not None:
                spec = next(s for s in run.workload.requests if s.id == c.request)
                assert c.cached == (len(spec.prompt_ids) - 1) // PAIR_BLOCK * PAIR_BLOCK


def test_the_pairs_five_ttft_parts_add_up_to_its_ttft(run):
    m = lane_metrics(run.lanes["vLLM P/D"].records, run.workload)
    for rid, q in m["requests"].items():
        parts = q["ttft_parts"]
        assert all(v >= 0 for v in parts.values()), (rid, parts)
        assert abs(sum(parts.values()) - q["ttft_ms"]) < 0.01, rid
    assert m["pd"]["transfers"] == len(run.workload.requests) and m["pd"]["through"] == ["vllm_example_connector"]
    print(f"\nvLLM pair on mixed: {m['pd']['blocks']} blocks, {m['pd']['bytes']:,} B, {m['pd']['ms']:.1f} ms "
          f"({m['pd']['ms_per_block']:.3f} ms per block); TTFT p50 {m['p50_ttft_ms']:.0f} ms")


def test_with_arrivals_in_ms_the_warm_pair_writes_the_same_and_decodes_only_after_each_copy(engine):
    """Second in the module: the pair kept warm from the mixed run, no vLLM start."""
    requests = [{"id": f"T{i}", "prompt": p, "max_new_tokens": n, "ignore_eos": i != 2, "arrival_ms": at}
                for i, (p, n, at) in enumerate(zip(PROMPTS, (12, 6, 24, 8), (0, 0, 150, 900)))]
    run = run_all(engine, {"name": "timed", "requests": requests, "slots": 4})
    assert not differences(run)
    lane = run.lanes["vLLM P/D"]
    m = lane_metrics(lane.records, run.workload)
    ready = {t.request: t.start_ms + t.ms for r in lane.records for t in r.transfers}
    for r in lane.records:
        decode = r.replicas[1]
        for c in (decode.slots if decode is not None else ()):
            if c.request is not None:
                assert decode.start_ms >= ready[c.request] - 1e-6, (r.step, c.request)
    for rid, q in m["requests"].items():
        assert all(v >= 0 for v in q["ttft_parts"].values()) and \
            abs(sum(q["ttft_parts"].values()) - q["ttft_ms"]) < 0.01, (rid, q["ttft_parts"])


def test_a_pair_engine_that_dies_mid_run_ends_the_run_with_a_clear_error(engine):
    """Last in the module: it kills the warm pair's prefill engine while a request is still to arrive there."""
    requests = [{"id": f"K{i}", "prompt": p, "max_new_tokens": 6, "arrival": at}
                for i, (p, at) in enumerate(zip(PROMPTS[:2], (0, 3)))]
    run = engine.start(engine.prepare(parse_workload({"name": "kill", "requests": requests, "slots": 4,
                                                      "lanes": [PAIR]})))
    run.tick()
    lane = run.lanes["vLLM P/D"]
    lane.pair.prefill.proc.kill()
    with pytest.raises(VllmError, match="the vLLM process exited"):
        for _ in range(6):
            run.tick()
    lane.abandon()   # what dropping the run does: the other engine ends too
    assert not lane.pair.decode.alive
