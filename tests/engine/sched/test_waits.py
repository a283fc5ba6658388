"""Why each request waits (engine/waits.py, StepRecord.waits): hand-made workloads on the step-clock simulator, one per
reason, check that the record names the reason for the right request at the right step, and that a KV shortfall is
exact (that many more blocks, and it would have been admitted). The simulator counts a prompt as 30 + bytes // 4
tokens; KV blocks hold 16 tokens."""
import re

from hypothesis import given, settings, strategies as st

from engine import Engine, parse_workload
from engine.waits import Wait, WaitReason
from tests.kit import ROOT

JS = ROOT / "static" / "js"


def prompt_of(tokens: int) -> str:
    assert tokens >= 31
    return "x" * 4 * (tokens - 30)


def req(rid, new, prompt=40, arrival=0, priority=0):
    return {"id": rid, "prompt": prompt_of(prompt), "max_new_tokens": new, "ignore_eos": True,
            "arrival": arrival, "priority": priority}


def records(requests, lane="continuous", slots=4, **options):
    engine = Engine(None)
    wl = engine.prepare(parse_workload({"name": "t", "slots": slots, "requests": requests, **options}))
    run = engine.start(wl, [lane])
    run.run_to_end()
    return run.lanes[lane].records


def waits_of(recs, rid) -> list[tuple[int, dict]]:
    """(step, wait) of every step `rid` waits in."""
    return [(r.step, r.waits[rid]) for r in recs if rid in r.waits]


def admitted_at(recs, rid) -> int:
    return next(r.step for r in recs if rid in r.admitted)


def test_a_request_with_every_slot_taken_waits_for_no_free_slot():
    recs = records([req("A", 3), req("B", 2)], slots=1)
    assert waits_of(recs, "B") == [(1, {"reason": "no_slot"}), (2, {"reason": "no_slot"}), (3, {"reason": "no_slot"})]
    assert admitted_at(recs, "B") == 4 and "A" not in recs[0].waits


def test_a_prompt_that_does_not_fit_the_kv_budget_says_how_many_blocks_it_is_short():
    # A: 40 prompt tokens (3 blocks) growing to 59 (4 blocks); a 5-block budget. B's 40-token prompt needs 3 blocks,
    # plus the one the lane keeps free for A's next token: 4, of which 2 are free in step 1, then 1 once A takes its
    # 4th block (after 48 tokens)
    recs = records([req("A", 20), req("B", 2)], kv_budget=5 * 16)
    waits = waits_of(recs, "B")
    assert waits[0] == (1, {"reason": "kv_blocks", "short": 2})
    assert {w["short"] for _, w in waits} == {2, 3}
    for step, w in waits:  # the shortfall each step: 3 blocks + 1 headroom - the blocks free after the step's growth
        r = recs[step - 1]
        assert w == {"reason": "kv_blocks", "short": 3 + 1 - (r.kv_blocks_total - r.kv_blocks_used)}, step
    assert admitted_at(recs, "B") == waits[-1][0] + 1  # A returned, its blocks freed


def test_the_kv_shortfall_is_exact_that_many_more_blocks_admit_it():
    wl = [req("A", 20), req("B", 2)]
    assert records(wl, kv_budget=5 * 16)[0].waits["B"] == {"reason": "kv_blocks", "short": 2}
    assert records(wl, kv_budget=6 * 16)[0].waits["B"] == {"reason": "kv_blocks", "short": 1}
    assert records(wl, kv_budget=7 * 16)[0].admitted == ("A", "B")  # 2 more blocks: admitted in step 1


def test_a_request_after_the_step_token_budget_is_spent_waits_for_the_token_budget():
    # A's 40-token prompt spends max_batch_tokens 40 in step 1; in step 2 A decodes one token and B takes 39
    recs = records([req("A", 5), req("B", 2)], max_batch_tokens=40)
    assert waits_of(recs, "B") == [(1, {"reason": "token_budget"})]
    assert admitted_at(recs, "B") == 2


def test_a_static_group_waits_for_its_members_to_arrive_and_not_arrived_is_not_waiting():
    recs = records([req("A", 2), req("B", 2, arrival=3)], lane="static", slots=2)
    assert waits_of(recs, "A") == [(s, {"reason": "group_not_full", "missing": 1}) for s in (1, 2, 3)]
    assert waits_of(recs, "B") == []  # pending until step 4, where both start
    assert recs[3].admitted == ("A", "B")


def test_a_static_lane_holds_the_next_request_until_the_running_group_is_done():
    recs = records([req("A", 5), req("B", 2), req("C", 2)], lane="static", slots=2)
    # step 1: the group A, B takes both slots; then B finishes but the group holds its slot until A is done
    assert waits_of(recs, "C") == [(1, {"reason": "no_slot"})] + [(s, {"reason": "group_running"}) for s in (2, 3, 4, 5)]
    assert admitted_at(recs, "C") == 6


def test_a_static_group_cut_by_the_kv_budget_says_how_many_blocks_the_rest_lack():
    # 40 + 40 new tokens: each row's worst case is 79 tokens = 5 blocks; 16 blocks fit three rows, the fourth is 4 short
    recs = records([req(f"R{i}", 40) for i in range(1, 5)], lane="static", kv_budget=256)
    assert recs[0].admitted == ("R1", "R2", "R3")
    assert recs[0].waits == {"R4": {"reason": "kv_blocks", "short": 4 * 5 - 16}}
    assert recs[1].waits == {"R4": {"reason": "group_running"}}


def test_a_dynamic_lane_counts_down_to_its_deadline():
    recs = records([req("A", 2), req("B", 2, arrival=10)], lane="dynamic", slots=2, max_wait=3)
    assert waits_of(recs, "A") == [(1, {"reason": "deadline", "left": 3}), (2, {"reason": "deadline", "left": 2}),
                                   (3, {"reason": "deadline", "left": 1})]
    assert admitted_at(recs, "A") == 4


def test_a_request_that_would_fit_waits_behind_a_higher_priority_one_short_of_kv_blocks():
    # R runs (3 blocks of a 6-block budget); at step 2 BIG (60 tokens: 4 blocks + 1 headroom, 3 free) comes first by
    # priority and is 2 short; SMALL (31 tokens: 2 blocks + 1) would fit, but nobody overtakes the head of the line
    wl = [req("R", 30), req("BIG", 2, prompt=60, arrival=1, priority=9), req("SMALL", 2, prompt=31, arrival=1)]
    recs = records(wl, slots=3, kv_budget=6 * 16, scheduling_policy="priority")
    assert recs[1].waits == {"BIG": {"reason": "kv_blocks", "short": 2}, "SMALL": {"reason": "behind", "ahead": "BIG"}}
    assert admitted_at(recs, "BIG") < admitted_at(recs, "SMALL")


def test_behind_a_head_of_line_request_one_that_does_not_fit_either_has_its_own_shortfall():
    wl = [req("R", 30), req("BIG", 2, prompt=60, arrival=1, priority=9), req("BIG2", 2, prompt=60, arrival=1)]
    recs = records(wl, slots=3, kv_budget=6 * 16, scheduling_policy="priority")
    assert recs[1].waits == {"BIG": {"reason": "kv_blocks", "short": 2}, "BIG2": {"reason": "kv_blocks", "short": 2}}


def test_the_record_writes_waits_only_when_someone_waits():
    recs = records([req("A", 3), req("B", 2)], slots=1)
    assert recs[0].to_dict()["waits"] == {"B": {"reason": "no_slot"}}
    assert "waits" not in recs[-1].to_dict()  # B runs alone: nobody waits


def test_a_wait_writes_only_its_own_numbers():
    assert Wait(WaitReason.KV_BLOCKS, short=3).to_dict() == {"reason": "kv_blocks", "short": 3}
    assert Wait(WaitReason.SIBLING, ahead="R3").to_dict() == {"reason": "sibling", "ahead": "R3"}
    assert Wait(WaitReason.NO_SLOT).to_dict() == {"reason": "no_slot"}


def test_the_page_twin_of_the_reasons_is_the_engine_vocabulary():
    source = (JS / "core" / "waits.js").read_text()
    body = re.search(r"export const WaitReason = Object\.freeze\(\{(.*?)\}\);", source, re.S)
    assert dict(re.findall(r'(\w+):\s*"([^"]*)"', body.group(1))) == {w.name: w.value for w in WaitReason}
    for w in WaitReason:  # every reason has its glossary entry
        assert f"wait_{w.value}:" in source, w


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(31, 120), st.integers(1, 20), st.integers(0, 8), st.integers(0, 3)),
                min_size=1, max_size=8),
       st.integers(1, 4), st.sampled_from([None, 8, 32]), st.sampled_from([None, 12, 40]),
       st.sampled_from(["fcfs", "priority", "sjf"]), st.sampled_from([None, 10]))
def test_every_waiting_request_has_a_reason_and_no_other_does(reqs, slots, chunk, budget_tokens, policy, blocks):
    requests = [req(f"R{i}", new, prompt=p, arrival=a, priority=pr) for i, (p, new, a, pr) in enumerate(reqs)]
    options = {"kv_budget": 16 * blocks} if blocks else {}
    for lane in ("static", "dynamic", "continuous"):
        extra = {"chunk_size": chunk, "max_batch_tokens": max(budget_tokens, slots) if budget_tokens else None,
                 "scheduling_policy": policy} if lane == "continuous" else {"max_wait": 3} if lane == "dynamic" else {}
        for r in records(requests, lane=lane, slots=slots, **options, **extra):
            assert set(r.waits) == set(r.waiting), (lane, r.step)
            assert all(w["reason"] in {x.value for x in WaitReason} for w in r.waits.values())
            assert all(w.get("short", 1) > 0 for w in r.waits.values())
