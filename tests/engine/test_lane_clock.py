"""Time-true lanes: every lane keeps its own clock (measured step times plus the time it waited), arrivals in
ms are admitted by that clock, and on the ms clock no lane finishes before its last request arrives or shows a
lower latency because it waited. On the simulator (its cost model makes every number exact) and the real model."""
import json
import statistics

import pytest

from engine import Engine, lane_metrics, parse_workload
from engine.worker.sim import SIM_CALL_MS, SIM_TOKEN_MS
from engine.step import SlotState
from tests.kit.reference import solo_generate
from tests.kit import ROOT

DEMOS = ROOT / "demos"


def run(lm, obj: dict, lanes=None):
    engine = Engine(lm)
    r = engine.start(engine.prepare(parse_workload(obj, lanes=lanes)))
    r.run_to_end()
    return r


def req(rid: str, new: int, **arrival) -> dict:
    return {"id": rid, "prompt": f"prompt {rid}", "max_new_tokens": new, "ignore_eos": True, **arrival}


def check_invariants(r) -> None:
    """The issue's invariant on every lane: the clock never runs backwards, a step that computed nothing is not
    free (it lasts the lane's median computed step so far, or a one-row decode before there is one), no request
    is computed before it arrives, no lane ends before its last arrival, and a request's latency counts every
    millisecond of the lane clock from its arrival to its return."""
    for name, lane in r.lanes.items():
        recs = [x.to_dict() for x in lane.records]
        m = lane_metrics(recs, r.workload)
        for prev, x in zip(recs, recs[1:]):
            assert x["start_ms"] >= prev["start_ms"] + prev["ms"] - 1e-6, (name, x["step"])
        for i, x in enumerate(recs):
            if x["forward"] == "none":  # waiting costs a step
                before = [y["ms"] for y in recs[:i] if y["forward"] != "none"]
                expected = statistics.median(before) if before else lane.runner.reference_ms()
                assert x["ms"] == pytest.approx(expected, abs=1e-3) and x["ms"] > 0, (name, x["step"])
        ends = [x["start_ms"] + x["ms"] for x in recs]
        last_arrival = max(q["arrival_ms"] for q in m["requests"].values())
        assert ends[-1] >= last_arrival, name
        for rid, q in m["requests"].items():
            first = recs[q["first_token_step"] - 1]
            assert first["start_ms"] >= q["arrival_ms"] - 1e-6, (name, rid)  # computed only once it arrived
            # every step from its arrival to its return counts, and so does any time the lane waited meanwhile
            between = sum(x["ms"] for x in recs if q["arrival_ms"] <= x["start_ms"] + 1e-6 and x["step"] <= q["return_step"])
            assert q["latency_ms"] >= between - 1e-6 and q["latency_ms"] >= q["ttft_ms"] > 0, (name, rid)
            assert q["latency_ms"] == pytest.approx(ends[q["return_step"] - 1] - q["arrival_ms"])


def test_ms_arrivals_are_admitted_in_the_first_step_starting_at_or_after_them():
    prompt = 30 + len(b"prompt A") // 4  # the simulator's token count of every prompt here
    step1 = SIM_CALL_MS + SIM_TOKEN_MS * prompt  # A's prefill
    r = run(None, {"name": "t", "slots": 3, "lanes": ["continuous"], "requests": [
        req("A", 3, arrival_ms=0), req("B", 2, arrival_ms=step1), req("C", 2, arrival_ms=step1 + 0.5),
        req("D", 2, arrival_ms=5000)]})
    recs = r.lanes["continuous"].records
    assert recs[0].start_ms == 0 and recs[0].ms == step1 and recs[0].admitted == ("A",)
    assert recs[1].start_ms == step1 and recs[1].admitted == ("B",)      # arrived exactly when step 2 starts
    assert recs[2].start_ms == step1 + recs[1].ms and recs[2].admitted == ("C",)  # arrived during step 2
    d_step = next(x for x in recs if x.admitted == ("D",))
    before = recs[d_step.step - 2]
    assert before.start_ms + before.ms < 5000 and d_step.start_ms == 5000  # idle: the clock jumped to D
    assert all(c.state is SlotState.IDLE for c in before.slots) is False
    m = lane_metrics(recs, r.workload)["requests"]
    assert m["D"]["ttft_ms"] == pytest.approx(d_step.ms) and m["D"]["arrival"] == d_step.step - 1
    assert m["B"]["ttft_ms"] == pytest.approx(recs[1].ms) and m["C"]["ttft_steps"] == 1


def test_static_waits_for_its_group_by_jumping_to_each_arrival_and_dynamic_by_its_deadline():
    obj = {"name": "t", "slots": 2, "lanes": ["static", {"name": "dynamic", "policy": "dynamic", "max_wait_ms": 300}],
           "requests": [req("A", 2, arrival_ms=0), req("B", 2, arrival_ms=1000)]}
    r = run(None, obj)
    static, dynamic = r.lanes["static"].records, r.lanes["dynamic"].records
    assert static[0].start_ms == 1000 and static[0].admitted == ("A", "B")  # nothing computed before B arrived
    assert dynamic[0].start_ms == 300 and dynamic[0].admitted == ("A",)     # A waited max_wait_ms: a partial group
    b = next(x for x in dynamic if "B" in x.admitted)
    assert b.start_ms == 1300  # alone again, B too waits max_wait_ms for company
    m = lane_metrics(static, r.workload)["requests"]
    assert m["A"]["ttft_ms"] == pytest.approx(1000 + static[0].ms)  # the wait counts in A's latency
    check_invariants(r)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("burstiness", [0.3, 1.0, 4.0])
def test_invariant_on_the_simulator_for_generated_traffic(seed, burstiness):
    obj = {"name": "g", "slots": 3, "lanes": ["static", {"name": "dynamic", "policy": "dynamic", "max_wait_ms": 200},
                                              "continuous", {"name": "chunked", "policy": "continuous", "chunk_size": 8,
                                                             "kv_budget": 256}],
           "generate": {"n": 10, "rate": 2 + 3 * seed, "burstiness": burstiness, "seed": seed,
                        "output_tokens": {"min": 1, "max": 12}, "prompt_words": {"min": 1, "max": 40}}}
    check_invariants(run(None, obj))


def test_step_arrivals_keep_their_steps_and_a_waiting_step_lasts_the_median_step():
    """The issue's example: one request arrives at step 120. Static waits for it with its first member; those
    waiting steps cost the lane's median step, so TTFT in ms follows TTFT in steps."""
    obj = {"name": "t", "slots": 2, "requests": [req("A", 4, arrival=0), req("B", 4, arrival=120)]}
    r = run(None, obj)
    static = r.lanes["static"].records
    assert len(static) == 124 and static[120].admitted == ("A", "B")  # the exact step semantics stay
    m = lane_metrics(static, r.workload)["requests"]["A"]
    assert m["ttft_steps"] == 121
    waiting = [x.ms for x in static if x.forward == "none"]
    assert len(waiting) == 120 and set(waiting) == {SIM_CALL_MS + SIM_TOKEN_MS}  # no measured step yet: the reference
    assert m["ttft_ms"] >= m["ttft_steps"] * min(x.ms for x in static)
    check_invariants(r)


def test_seed_tables_still_exact_on_the_simulator_step_clock():
    for name, steps in (("mixed", (15, 9)), ("same", (8, 8)), ("one-long", (14, 12))):
        r = run(None, json.loads((DEMOS / f"{name}.json").read_text()))
        assert (len(r.lanes["static"].records), len(r.lanes["continuous"].records)) == steps


def test_lanes_as_configurations_run_side_by_side_with_their_own_options():
    obj = json.loads((DEMOS / "long-prompt.json").read_text())
    r = run(None, obj)
    assert list(r.lanes) == ["static", "continuous", "chunked 64"]
    chunked = [c.prefill for x in r.lanes["chunked 64"].records for c in x.slots if c.request == "LONG" and c.prefill]
    whole = [c.prefill for x in r.lanes["continuous"].records for c in x.slots if c.request == "LONG" and c.prefill]
    assert len(whole) == 1 and len(chunked) > 1 and all(b - a <= 64 for (a, _), (b, _) in zip([(0, 0)] + chunked, chunked))
    slots = run(None, json.loads((DEMOS / "slots.json").read_text()))
    assert [len(lane.records[0].slots) for lane in slots.lanes.values()] == [4, 8]


@pytest.mark.model
def test_arrivals_preset_on_the_real_model_continuous_finishes_no_later_with_lower_ttft(smol):
    r = run(smol, json.loads((DEMOS / "arrivals.json").read_text()))
    check_invariants(r)
    m = {name: lane_metrics(lane.records, r.workload) for name, lane in r.lanes.items()}
    assert m["continuous"]["wall_s"] <= m["static"]["wall_s"]
    assert m["continuous"]["mean_ttft_ms"] < m["static"]["mean_ttft_ms"]
    assert all(not x["simulated"] for x in m.values())


@pytest.mark.model
def test_invariant_on_the_real_model_with_step_arrivals_and_four_configured_lanes(smol):
    """Four lanes as configurations on the real model: every lane still writes what generate() writes alone."""
    prompts = ["Hi", "What is the capital of France?", "Name three colours.", "2+2?", "List two planets."]
    obj = {"name": "t", "slots": 2, "lanes": [
        "static", "continuous", {"name": "chunked 8", "policy": "continuous", "chunk_size": 8},
        {"name": "4 slots fused", "policy": "continuous", "slots": 4, "fused": True}],
        "requests": [{"id": f"R{i}", "prompt": p, "max_new_tokens": 3 + i, "ignore_eos": i != 1,
                      "arrival": [0, 0, 3, 9, 9][i]} for i, p in enumerate(prompts)]}
    r = run(smol, obj)
    check_invariants(r)
    for spec in r.workload.requests:
        ref = solo_generate(smol, spec.prompt_ids, spec.max_new_tokens, () if spec.ignore_eos else smol.eos_ids)
        for name, lane in r.lanes.items():
            assert next(q for q in lane.requests if q.id == spec.id).output_ids == ref, (name, spec.id)
