"""Beyond the textbook, on the step-clock simulator: chunked prefill, token budgets, KV blocks,
preemption and admission orders. The simulator counts a prompt as 30 + bytes // 4 tokens."""
import json

import pytest
from hypothesis import given, settings, strategies as st

from engine import Engine, WorkloadError, lane_metrics, parse_workload
from engine.step import SlotState
from tests.kit import ROOT

DEMOS = ROOT / "demos"


def prompt_of(tokens: int) -> str:
    """A prompt the simulator counts as exactly `tokens` tokens."""
    assert tokens >= 31
    return "x" * 4 * (tokens - 30)


def simulate(requests, slots=4, lanes=("continuous",), **options):
    engine = Engine(None)
    wl = engine.prepare(parse_workload({"name": "t", "slots": slots, "requests": requests, **options}))
    run = engine.start(wl, list(lanes))
    run.run_to_end()
    return run


def req(rid, new, prompt=40, arrival=0, priority=0):
    return {"id": rid, "prompt": prompt_of(prompt), "max_new_tokens": new, "ignore_eos": True,
            "arrival": arrival, "priority": priority}


def cells(record, rid):
    return [c for c in record.slots if c.request == rid]


def test_chunked_prefill_spreads_a_long_prompt_over_steps_beside_decodes():
    run = simulate([req("D", 8), req("L", 2, prompt=200, arrival=1)], chunk_size=64)
    recs = run.lanes["continuous"].records
    long_cells = [cells(r, "L")[0] for r in recs if cells(r, "L")]
    assert [c.prefill for c in long_cells[:4]] == [(64, 200), (128, 200), (192, 200), (200, 200)]
    assert [c.token_id is not None for c in long_cells[:4]] == [False, False, False, True]
    # the decoder keeps writing one token every step while the prompt is read
    assert all(cells(r, "D")[0].state is SlotState.DECODE for r in recs[1:5])


def test_whole_prompt_prefill_without_chunking():
    run = simulate([req("D", 4), req("L", 2, prompt=200, arrival=1)])
    c = cells(run.lanes["continuous"].records[1], "L")[0]
    assert c.prefill == (200, 200) and c.token_id is not None


def computed_tokens(records) -> list[int]:
    """Tokens each step fed through the model: 1 per decode or padding row, the chunk per prefill row."""
    seen, out = {}, []
    for r in records:
        n = 0
        for c in r.slots:
            if c.state in (SlotState.DECODE, SlotState.PADDING):
                n += 1
            elif c.state is SlotState.PREFILL:
                n += c.prefill[0] - seen.get(c.request, 0)
                seen[c.request] = c.prefill[0]
        out.append(n)
    return out


def test_token_budget_caps_what_a_step_computes():
    requests = [req(f"D{i}", 20) for i in range(3)] + [req("L", 2, prompt=200, arrival=6)]
    recs = simulate(requests, max_batch_tokens=50).lanes["continuous"].records
    per_step = computed_tokens(recs)
    assert max(per_step) == 50 and all(n <= 50 for n in per_step)
    # the three 40-token prompts are themselves chunked by the budget: 40 + 10, then 30 + 19 (+ 1 decode)
    assert [c.prefill for c in recs[0].slots if c.prefill] == [(40, 40), (10, 40)]
    # once all three decode, the long prompt gets the 47 tokens they leave
    long_cells = [cells(r, "L")[0] for r in recs if cells(r, "L")]
    assert [c.prefill[0] for c in long_cells if c.prefill] == [47, 94, 141, 188, 200]


def test_preemption_evicts_the_newest_running_request_and_recomputes_it():
    # 4 requests of 40 prompt + 40 new tokens: each row grows to 79 tokens = 5 blocks of 16; 16 blocks fit 3
    run = simulate([req(f"R{i}", 40) for i in range(1, 5)], kv_budget=256)
    recs = run.lanes["continuous"].records
    first = next(r for r in recs if r.preempted)
    assert first.preempted == ("R4",)  # admitted last (slot order breaks the tie), so preempted first
    assert [c.state for c in first.slots].count(SlotState.PREEMPTED) == 1
    assert first.waiting[0] == "R4"    # back to the head of the queue
    later = next(c for r in recs[first.step:] for c in r.slots if c.request == "R4" and c.state is SlotState.PREFILL)
    done = lane_metrics([r for r in recs if r.step < first.step], run.workload)["requests"]["R4"]["tokens"]
    assert later.prefill == (40 + done, 40 + done)  # recomputes prompt + the tokens it had written
    m = lane_metrics(recs, run.workload)
    assert m["preemptions"] >= 1 and all(q["tokens"] == 40 for q in m["requests"].values())


def test_priority_policy_admits_higher_priority_first_and_preempts_lowest_first():
    requests = [req("A", 6), req("B", 12), req("C", 6, arrival=1), req("VIP", 3, arrival=2, priority=5)]
    run = simulate(requests, slots=2, policy="priority")
    m = lane_metrics(run.lanes["continuous"].records, run.workload)["requests"]
    assert m["VIP"]["first_token_step"] < m["C"]["first_token_step"]  # overtakes C, which arrived earlier
    fcfs = lane_metrics(simulate(requests, slots=2).lanes["continuous"].records, run.workload)["requests"]
    assert fcfs["VIP"]["first_token_step"] > fcfs["C"]["first_token_step"]
    # under memory pressure the low-priority request is the one evicted
    run = simulate([req("HI", 40, priority=9), req("LO", 40, priority=0), req("MID", 40, priority=5)],
                   slots=3, policy="priority", kv_budget=176)
    evicted = [rid for r in run.lanes["continuous"].records for rid in r.preempted]
    assert evicted and evicted[0] == "LO"


def test_sjf_admits_fewest_max_new_tokens_first_with_fcfs_ties():
    requests = [req("LONG", 12), req("B", 3), req("C", 2), req("D", 3, arrival=1), req("E", 2, arrival=1)]
    run = simulate(requests, slots=1, scheduling_policy="sjf")
    recs = run.lanes["continuous"].records
    order = [rid for r in recs for rid in r.admitted]
    assert order == ["C", "E", "B", "D", "LONG"]  # 2, 2 (C arrived first), 3, 3 (B first), then 12


def test_sjf_demo_lowers_mean_latency_and_the_longest_request_waits_longest():
    wl = json.loads((DEMOS / "sjf.json").read_text())
    engine = Engine(None)
    run = engine.start(engine.prepare(parse_workload(wl)))
    run.run_to_end()
    fcfs, sjf = (lane_metrics(run.lanes[n].records, run.workload) for n in ("fcfs", "sjf"))
    assert sjf["mean_latency_steps"] < fcfs["mean_latency_steps"]
    longest = max(wl["requests"], key=lambda q: q["max_new_tokens"])["id"]
    admitted = {rid: r.step for r in run.lanes["sjf"].records for rid in r.admitted}
    assert admitted[longest] == max(admitted.values())  # no request starts after the longest under sjf...
    assert admitted[longest] > {rid: r.step for r in run.lanes["fcfs"].records for rid in r.admitted}[longest]
    assert "lowers the mean latency" in wl["description"] and "waits longest" in wl["description"]


def test_static_lane_admits_only_a_group_whose_worst_case_fits():
    run = simulate([req(f"R{i}", 40) for i in range(1, 5)], lanes=("static",), kv_budget=256)
    recs = run.lanes["static"].records
    assert recs[0].admitted == ("R1", "R2", "R3")  # 3 x 5 blocks fit 16, the 4th waits: a blocked queue
    assert not any(r.preempted for r in recs)


def test_request_that_can_never_fit_is_refused_at_submission():
    with pytest.raises(WorkloadError) as e:
        simulate([req("ok", 4), req("huge", 200, prompt=100)], kv_budget=256)
    assert e.value.field == "requests[1].max_new_tokens" and "KV budget" in str(e.value)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(31, 120), st.integers(1, 30), st.integers(0, 8), st.integers(0, 3)),
                min_size=1, max_size=10),
       st.integers(1, 4), st.sampled_from([None, 8, 32]), st.sampled_from([None, 12, 40]),
       st.sampled_from(["fcfs", "priority"]))
def test_block_use_never_exceeds_the_budget_and_every_request_finishes(reqs, slots, chunk, budget_tokens, policy):
    requests = [req(f"R{i}", new, prompt=p, arrival=a, priority=pr) for i, (p, new, a, pr) in enumerate(reqs)]
    kv_budget = 16 * 10  # 10 blocks: 160 tokens, enough for any single request here (120 + 30 - 1)
    run = simulate(requests, slots=slots, lanes=("static", "dynamic", "continuous"), kv_budget=kv_budget,
                   chunk_size=chunk, max_batch_tokens=max(budget_tokens, slots) if budget_tokens else None,
                   policy=policy, max_wait=3)
    for lane in run.lanes.values():
        assert lane.records, "lane produced no steps"
        assert all(r.kv_blocks_used <= r.kv_blocks_total == 10 for r in lane.records)
        m = lane_metrics(lane.records, run.workload)
        assert all(q["tokens"] == new for q, (_, new, _, _) in zip(m["requests"].values(), reqs))
        assert len(lane.records) < 2000
