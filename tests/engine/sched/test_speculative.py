"""Speculative decoding by prompt lookup (the `speculative` lane option): the proposer and the greedy acceptance on
exact token lists, the option's checks, and token-exactness with solo generate() on a tiny random Llama and on
the real SmolLM2 (where quoting a passage from the prompt must keep some proposals)."""
import json
from dataclasses import replace

import pytest

from engine import Engine, lane_metrics, parse_workload
from engine.config import SpeculativeConfig
from engine.request import RequestStatus
from engine.sched.speculative import accept, num_accepted, propose
from engine.workload.workload import WorkloadError
from tests.kit.reference import PROMPTS, check_against_solo, run_lanes, solo_generate
from tests.kit import ROOT

DEMOS = ROOT / "demos"
SPEC = {"method": "prompt_lookup", "k": 4}


# -- the proposer -----------------------------------------------------------------------------------
def test_propose_continues_the_latest_earlier_match_of_the_longest_tail():
    # tail (7, 8) occurs at 1 and at 5: the latest match wins, and what followed it is proposed
    assert propose([1, 7, 8, 2, 3, 7, 8, 4, 9, 7, 8], k=3) == [4, 9, 7]
    assert propose([1, 7, 8, 2, 3, 7, 8, 4, 9, 7, 8], k=1) == [4]


def test_propose_prefers_a_longer_ngram_over_a_later_shorter_one():
    # the 3-gram (5, 6, 7) matches at 0 (-> 1, 2); the 1-gram 7 alone matches later at 5 (-> 9)
    tokens = [5, 6, 7, 1, 2, 7, 9, 5, 6, 7]
    assert propose(tokens, k=2) == [1, 2]
    assert propose(tokens, k=2, max_ngram=1) == [9, 5]


def test_propose_stops_at_the_end_of_the_text_and_finds_nothing_without_a_match():
    assert propose([3, 4, 3], k=4) == [4, 3]           # 1-gram 3 at 0: only what follows exists
    assert propose([1, 2, 3, 4], k=4) == []             # no tail n-gram occurs earlier
    assert propose([1, 2, 3, 2], k=4, min_ngram=2) == []  # only a 1-gram would match
    assert propose([7], k=4) == [] and propose([], k=4) == [] and propose([1, 1], k=0) == []


# -- greedy acceptance ------------------------------------------------------------------------------
def test_accept_keeps_agreed_proposals_then_the_models_own_token():
    assert accept([4, 5, 6], [4, 5, 6, 7]) == [4, 5, 6, 7]  # all kept, plus the bonus token
    assert accept([4, 5, 6], [4, 9, 6, 7]) == [4, 9]        # first mismatch: the model's correction, then stop
    assert accept([4, 5, 6], [8, 5, 6, 7]) == [8]           # none kept: one token, as a plain decode step
    assert num_accepted([4, 5, 6], [4, 5, 6, 7]) == 3 and num_accepted([4, 5, 6], [4, 9]) == 1
    assert num_accepted([4, 5, 6], [4, 5]) == 2             # cut by a stop inside the kept run


# -- the option, checked at the edge ----------------------------------------------------------------
def workload(lanes, **extra) -> dict:
    return {"name": "spec", "slots": 2, "lanes": lanes, **extra,
            "requests": [{"id": "R", "prompt": "Hi", "max_new_tokens": 4}]}


@pytest.mark.parametrize("spec, field, words", [
    ({"method": "draft_model", "k": 4}, "lanes[0].speculative.method", "prompt_lookup"),
    ({"method": "prompt_lookup", "k": 0}, "lanes[0].speculative.k", "from 1 to 16"),
    ({"method": "prompt_lookup", "k": True}, "lanes[0].speculative.k", "integer"),
    ({"k": 4}, "lanes[0].speculative.method", "required"),
    ({"method": "prompt_lookup", "draft": 1}, "lanes[0].speculative.draft", "unknown key"),
    ({"method": "prompt_lookup", "min_ngram": 3, "max_ngram": 2}, "lanes[0].speculative.min_ngram", "max_ngram"),
    ("prompt_lookup", "lanes[0].speculative", "object"),
])
def test_bad_speculative_options_are_refused_naming_the_field(spec, field, words):
    with pytest.raises(WorkloadError) as e:
        parse_workload(workload([{"name": "s", "policy": "continuous", "speculative": spec}]))
    assert e.value.field == field and words in str(e.value)


def test_the_option_round_trips_and_is_every_lanes_default():
    wl = parse_workload(workload(["continuous", {"name": "spec", "policy": "static", "speculative": SPEC}]))
    assert wl.lanes[1].config.speculative == SpeculativeConfig("prompt_lookup", 4)
    assert wl.lanes[0].config.speculative is None
    assert wl.to_dict()["lanes"][1] == {"name": "spec", "policy": "static", "speculative": SPEC}
    wl = parse_workload(workload(["continuous"], speculative={"method": "prompt_lookup", "k": 2}))
    assert wl.lanes[0].config.speculative.k == 2 and wl.to_dict()["speculative"] == {"method": "prompt_lookup", "k": 2}


def test_the_simulator_refuses_a_speculative_lane():
    wl = parse_workload(workload(["continuous", {"name": "spec", "policy": "continuous", "speculative": SPEC}]))
    with pytest.raises(WorkloadError) as e:
        Engine(None).prepare(wl)
    assert e.value.field == "lanes[1].speculative" and "simulator" in str(e.value)


# -- token-exactness --------------------------------------------------------------------------------

def check_cells(run, lane: str) -> dict:
    """The records of `lane` agree with its requests (tokens, text, counts); return its metrics."""
    m = lane_metrics(run.lanes[lane].records, run.workload)
    for r in run.lanes[lane].requests:
        assert m["requests"][r.id]["token_ids"] == r.output_ids
    for rec in run.lanes[lane].records:
        for cell in rec.slots:
            if cell.proposed is not None:
                written = cell.tokens or (cell.token_id,)
                assert cell.state.value == "decode" and 0 <= cell.accepted <= cell.proposed
                assert len(written) in (cell.accepted, cell.accepted + 1) and written[-1] == cell.token_id
    return m


def proposed_and_accepted(run, lane: str) -> tuple[int, int]:
    cells = [c for r in run.lanes[lane].records for c in r.slots if c.proposed is not None]
    return sum(c.proposed for c in cells), sum(c.accepted for c in cells)


@pytest.fixture(scope="module")
def tiny_eos(tiny):
    """The tiny model with an EOS id that the 30th token it writes for a repeated prompt hits."""
    ref = solo_generate(tiny, tiny.encode_prompt(PROMPTS[3] * 4), 30)
    return replace(tiny, eos_ids=frozenset({ref[29]}))


# The tiny random model hardly ever repeats itself, so lookup proposes little and the model rejects it: these
# tests check that verifying rows of several tokens, and the rejected K/V they leave behind, change nothing.
@pytest.mark.parametrize("fused", [False, True])
def test_tiny_model_speculative_lanes_match_solo_generate(tiny_eos, fused):
    requests = [{"id": f"R{i}", "prompt": p * (1 + i % 4), "max_new_tokens": 30 + (7 * i) % 25,
                 "ignore_eos": i % 3 == 0, "arrival": [0, 0, 1, 3, 3, 4, 6, 7][i]} for i, p in enumerate(PROMPTS)]
    lanes = [{"name": f"{p} spec", "policy": p, "speculative": {"method": "prompt_lookup", "k": 3}}
             for p in ("static", "continuous")] + [{"name": "chunked spec", "policy": "continuous", "chunk_size": 16,
                                                   "max_batch_tokens": 20, "speculative": SPEC}]
    run = run_lanes(tiny_eos, requests, 3, lanes, fused=fused)
    check_against_solo(tiny_eos, run, tiny_eos.eos_ids)
    for lane in run.lanes:
        check_cells(run, lane)
        assert proposed_and_accepted(run, lane)[0] > 0


def test_tiny_model_speculative_lane_under_a_kv_budget_matches_solo_generate(tiny_eos):
    requests = [{"id": f"R{i}", "prompt": PROMPTS[i % 8] * 3, "max_new_tokens": 40 + i % 5, "ignore_eos": True}
                for i in range(6)]
    lanes = [{"name": "spec KV", "policy": "continuous", "kv_budget": 384, "speculative": SPEC}]
    run = run_lanes(tiny_eos, requests, 4, lanes)
    check_against_solo(tiny_eos, run, tiny_eos.eos_ids)
    recs = run.lanes["spec KV"].records
    assert all(r.kv_blocks_used <= r.kv_blocks_total for r in recs) and proposed_and_accepted(run, "spec KV")[0] > 0
    check_cells(run, "spec KV")


# -- the real model ---------------------------------------------------------------------------------
@pytest.mark.model
def test_real_model_quote_preset_is_token_exact_and_keeps_proposals(smol):
    """Also with the prefix cache on the same lane: hits and kept proposals together still write generate()'s tokens."""
    raw = json.loads((DEMOS / "spec-quote.json").read_text())
    raw["lanes"].append({"name": "lookup + prefix cache", "policy": "continuous", "prefix_cache": True,
                         "speculative": {"method": "prompt_lookup", "k": 4}})
    for i, request in enumerate(raw["requests"]):  # one a step: a prompt's blocks can be hit from the next step on
        request["arrival"] = i
    engine = Engine(smol)
    run = engine.start(engine.prepare(parse_workload(raw)))
    run.run_to_end()
    check_against_solo(smol, run, smol.eos_ids)
    both = check_cells(run, "lookup + prefix cache")
    assert both["prompt_tokens_cached"] > 0 and both["spec_acceptance_rate"] > 0.5
    spec_lane = next(lane.name for lane in run.workload.lanes if lane.config.speculative is not None)
    plain_lane = next(lane.name for lane in run.workload.lanes if lane.config.speculative is None)
    m, plain = check_cells(run, spec_lane), check_cells(run, plain_lane)
    assert m["spec_acceptance_rate"] > 0.5 and m["tokens_per_decode_cell"] > 1.5
    assert m["steps"] < plain["steps"] and plain["spec_acceptance_rate"] is None
    assert plain["tokens_per_decode_cell"] == 1.0
    assert {k: q["text"] for k, q in m["requests"].items()} == {k: q["text"] for k, q in plain["requests"].items()}


QUOTE = "Repeat this text exactly: The quick brown fox jumps over the lazy dog. A journey of a thousand miles " \
        "begins with a single step."


@pytest.mark.model
def test_real_model_eos_and_max_new_tokens_cut_an_accepted_run_exactly(smol):
    """An EOS (here: a token the quote writes mid-run, made the EOS) or max_new_tokens inside a run of kept
    proposals ends the request at that very token, as generate() does."""
    ref = solo_generate(smol, smol.encode_prompt(QUOTE), 40, smol.eos_ids)
    eos_lm = replace(smol, eos_ids=smol.eos_ids | {ref[9]})
    requests = [{"id": "EOS", "prompt": QUOTE, "max_new_tokens": 40, "ignore_eos": False}] + [
        {"id": f"LEN{n}", "prompt": QUOTE, "max_new_tokens": n, "ignore_eos": True} for n in (6, 7, 8, 9)]
    run = run_lanes(eos_lm, requests, 5, [{"name": "spec", "policy": "continuous", "speculative": SPEC}])
    check_against_solo(eos_lm, run, eos_lm.eos_ids)
    m = check_cells(run, "spec")
    assert m["requests"]["EOS"]["tokens"] == ref.index(ref[9]) + 1 and m["requests"]["EOS"]["stop"] == "eos"
    assert [m["requests"][f"LEN{n}"]["tokens"] for n in (6, 7, 8, 9)] == [6, 7, 8, 9]
    last = [c for r in run.lanes["spec"].records for c in r.slots if c.request == "EOS" and c.stop]
    assert last[0].tokens and len(last[0].tokens) > 1  # the EOS came inside a several-token step
    assert proposed_and_accepted(run, "spec")[1] > 0


# -- the scheduler's side, without a model: what a speculative decode row feeds and how its tokens fold in --------
def scheduler(budget: int | None, *specs):
    from engine.config import EngineConfig
    from engine.sched.policies import ContinuousScheduler
    config = EngineConfig(slots=2, kv_budget=budget, kv_block_size=4, speculative=SpeculativeConfig(k=4))
    return ContinuousScheduler(config, list(specs), eos_ids=frozenset({99}))


def prefilled(s, first: dict[int, int]):
    """Step 1 (every prompt prefilled), its first tokens folded in; then the rows of step 2."""
    out = s.schedule()
    s.update_from_output(out, first)
    return s.schedule()


def spec_of(rid: str, prompt: list[int], new: int, ignore_eos: bool = True):
    from engine.request import RequestSpec
    return RequestSpec(rid, "p", new, ignore_eos=ignore_eos, prompt_ids=tuple(prompt))


LOOP = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]  # after a written 1, lookup proposes 2 3 4 5


def test_a_decode_row_feeds_the_last_token_and_the_proposals_and_holds_their_kv_blocks():
    s = scheduler(None, spec_of("A", LOOP, 20))
    out = prefilled(s, {0: 1})
    row = out.rows[0]
    assert (row.token_ids, row.start, row.proposed) == ([1, 2, 3, 4, 5], 10, 4)
    assert s.blocks.held["A"] == 4  # 15 positions in blocks of 4: grown before the step by k + 1
    update = s.update_from_output(out, tokens := {0: [2, 3, 7]})  # two proposals kept, then the model's own token
    r = s.requests[0]
    assert (r.output_ids, r.num_cached, update.written[0]) == ([1, 2, 3, 7], 13, [2, 3, 7])
    assert tokens == {0: [2, 3, 7]}  # the runner's tokens are left as they were


def test_proposals_stop_at_max_new_tokens_and_at_the_kv_blocks_the_others_need():
    s = scheduler(None, spec_of("A", LOOP, 3))
    assert prefilled(s, {0: 1}).rows[0].token_ids == [1, 2]  # 2 more tokens may be written: 1 proposal at most
    # 12 tokens of budget (3 blocks) for A alone: 10 prompt + 1 written + 1 proposal
    s = scheduler(12, spec_of("A", LOOP, 2))
    assert prefilled(s, {0: 1}).rows[0].token_ids == [1]  # max_new_tokens 2: nothing to propose
    s = scheduler(12, spec_of("A", LOOP, 20))
    assert prefilled(s, {0: 1}).rows[0].token_ids == [1, 2]
    # 5 blocks; beside B (a full block of prompt: its first token needs a second block), A may not take the last
    # free block for proposals: it keeps to its own 3 blocks (12 tokens: 11 + 1 proposal)
    s = scheduler(20, spec_of("A", LOOP, 20), spec_of("B", [6, 7, 8, 10], 20))
    rows = prefilled(s, {0: 1, 1: 9}).rows
    assert [row.token_ids for row in rows] == [[1, 2], [9]] and s.blocks.num_free == 0


def test_an_eos_or_max_new_tokens_inside_the_kept_tokens_cuts_them_there():
    s = scheduler(None, spec_of("A", LOOP, 20, ignore_eos=False))
    out = prefilled(s, {0: 1})
    update = s.update_from_output(out, tokens := {0: [2, 99, 4, 5, 1]})
    r = s.requests[0]
    assert (r.output_ids, r.stop.value, r.num_cached, update.written[0]) == ([1, 2, 99], "eos", 12, [2, 99])
    assert tokens == {0: [2, 99, 4, 5, 1]} and r.status is RequestStatus.FINISHED and r.finish_step == s.step  # cut in what it returns, not in its input
    # max_new_tokens: 3 more tokens may be written, so 2 proposals; all kept, the bonus token is the last one
    s = scheduler(None, spec_of("A", LOOP, 4))
    out = prefilled(s, {0: 1})
    assert out.rows[0].proposed == 2
    update = s.update_from_output(out, {0: [2, 3, 4]})
    assert (s.requests[0].output_ids, s.requests[0].stop.value, update.written[0]) == ([1, 2, 3, 4], "length", [2, 3, 4])
