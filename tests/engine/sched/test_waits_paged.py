"""Wait reasons of the paged KV cache's features (branch alloc: swap preemption, siblings of parallel sampling), on the
simulator: a swapped-out request waits `swapped` with its exact shortfall, a sibling waits `sibling` for its leader's
prompt, and every waiting request has a reason. Skipped where the allocator has no swap (before alloc merges)."""
import pytest
from hypothesis import given, settings, strategies as st

from engine import Engine, parse_workload
from engine.kv.block_manager import BlockManager
from engine.request import RequestSpec
from engine.waits import WaitReason

pytestmark = pytest.mark.skipif(not hasattr(BlockManager, "swap_in"), reason="the paged allocator (branch alloc)")


def prompt_of(tokens: int) -> str:
    return "x" * 4 * (tokens - 30)


def req(rid, new, prompt=40, arrival=0):
    return {"id": rid, "prompt": prompt_of(prompt), "max_new_tokens": new, "ignore_eos": True, "arrival": arrival}


def test_a_swapped_out_request_waits_for_room_to_swap_back_in_and_says_how_many_blocks_it_lacks():
    engine = Engine(None)
    wl = engine.prepare(parse_workload({"name": "t", "slots": 6, "kv_budget": 16 * 16, "lanes": [
        {"name": "swap", "policy": "continuous", "preemption": "swap"}], "requests": [req(f"R{i}", 60) for i in range(6)]}))
    run = engine.start(wl)
    run.run_to_end()
    lane = run.lanes["swap"]
    swapped = [(r, rid, w) for r in lane.records for rid, w in r.waits.items() if w["reason"] == WaitReason.SWAPPED.value]
    assert swapped, "no request waited swapped out"
    for r, rid, w in swapped:
        assert w["short"] > 0 and rid in r.waiting
    assert all(set(r.waits) == set(r.waiting) for r in lane.records)


def test_a_sibling_waits_for_its_leaders_prompt():
    from engine.config import EngineConfig
    from engine.lane import Lane
    from engine.sched.policies import ContinuousScheduler
    from engine.worker.sim import SimRunner, sim_prompt_ids

    ids = tuple(sim_prompt_ids(prompt_of(80)))
    specs = [RequestSpec(f"R0·{i + 1}", "p", 4, prompt_ids=ids, group="R0") for i in range(3)]
    scheduler = ContinuousScheduler(EngineConfig(slots=3, chunk_size=32), specs)
    b = scheduler.blocks
    lane = Lane("c", scheduler, SimRunner(3, b.num_blocks, b.block_size, b.host_blocks), kv_capacity=0)
    first = lane.step()  # the leader prefills its first 32-token chunk; its samples wait for the prompt they share
    assert first.admitted == ("R0·1",)
    assert first.waits == {"R0·2": {"reason": "sibling", "ahead": "R0·1"}, "R0·3": {"reason": "sibling", "ahead": "R0·1"}}


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(31, 100), st.integers(1, 24), st.integers(0, 6)), min_size=1, max_size=8),
       st.integers(1, 4), st.sampled_from([None, 8, 32]))
def test_every_waiting_request_has_a_reason_on_reserve_and_swap_lanes(reqs, slots, chunk):
    requests = [req(f"R{i}", new, prompt=p, arrival=a) for i, (p, new, a) in enumerate(reqs)]
    continuous = {"policy": "continuous", "chunk_size": chunk}
    engine = Engine(None)
    wl = engine.prepare(parse_workload({"name": "t", "slots": slots, "kv_budget": 16 * 10, "requests": requests, "lanes": [
        {"name": "swap", **continuous, "preemption": "swap"}, {"name": "reserve", **continuous, "kv_allocation": "reserve"},
        {"name": "static", "policy": "static", "kv_allocation": "reserve"}]}))
    run = engine.start(wl)
    run.run_to_end()
    for lane in run.lanes.values():
        for r in lane.records:
            assert set(r.waits) == set(r.waiting), (lane.name, r.step)
            assert all(w.get("short", 1) > 0 for w in r.waits.values()), (lane.name, r.step, r.waits)
