"""Parallel sampling, request side: a workload request's `n` expands into n siblings (ids `R3·i`, group `R3`, seeds
seed + i - 1), every bad `n` refused naming the field, the siblings run on every lane (simulator) and write what
the request alone writes (the real model, marked model: greedy = solo generate(), and seeded sampling through the
engine's own sampler = the same seed alone); their full prompt blocks are shared by reference (simulator)."""
import pytest

from engine import Engine, Limits, WorkloadError, parse_workload
from engine.workload.siblings import collapse, expand, sibling_id, sibling_seed, written_index
from engine.request import RequestSpec

from tests.kit.reference import run_lanes, solo_generate


def req(rid: str, **kw) -> dict:
    return {"id": rid, "prompt": f"prompt {rid}", "max_new_tokens": 4, **kw}


def test_n_expands_a_request_into_siblings_with_ids_groups_and_seeds():
    wl = parse_workload({"requests": [req("R1"), req("R3", n=3, seed=5, temperature=0.8), req("R4", n=2)]})
    got = [(r.id, r.group, r.seed, r.temperature, r.prompt) for r in wl.requests]
    assert got == [("R1", None, None, 0.0, "prompt R1"),
                   ("R3·1", "R3", 5, 0.8, "prompt R3"), ("R3·2", "R3", 6, 0.8, "prompt R3"),
                   ("R3·3", "R3", 7, 0.8, "prompt R3"),
                   ("R4·1", "R4", None, 0.0, "prompt R4"), ("R4·2", "R4", None, 0.0, "prompt R4")]


def test_n_1_is_the_request_itself():
    (spec,) = parse_workload({"requests": [req("R1", n=1, seed=3)]}).requests
    assert (spec.id, spec.group, spec.seed) == ("R1", None, 3)


def test_a_sibling_seed_wraps_inside_a_signed_64_bit_integer():
    assert sibling_seed(2 ** 63 - 1, 2) == -2 ** 63 and sibling_seed(-1, 2) == 0 and sibling_seed(None, 4) is None
    assert sibling_id("R3", 2) == "R3\u00b72"


def test_a_workload_with_siblings_writes_its_requests_back_as_written():
    written = [req("R1"), req("R3", n=3, seed=5, temperature=0.8), req("R4", n=2)]
    wl = parse_workload({"requests": written})
    back = wl.to_dict()["requests"]
    assert [(q["id"], q.get("n"), q.get("seed"), q.get("temperature")) for q in back] == [
        ("R1", None, None, None), ("R3", 3, 5, 0.8), ("R4", 2, None, None)]
    assert parse_workload(wl.to_dict()).requests == wl.requests


def test_collapse_and_written_index_undo_expand():
    specs = [RequestSpec("A", "p", 2), *expand(RequestSpec("B", "p", 2, seed=9), 3), RequestSpec("C", "p", 2)]
    assert [(s.id, s.seed, n) for s, n in collapse(specs)] == [("A", None, 1), ("B", 9, 3), ("C", None, 1)]
    assert [written_index(specs, i) for i in range(len(specs))] == [0, 1, 1, 1, 2]


@pytest.mark.parametrize("n, message", [(0, "from 1 to 8, got 0"), (9, "from 1 to 8, got 9"),
                                        ("3", "must be an integer, got str"), (2.0, "must be an integer, got float"),
                                        (True, "must be an integer, got bool"), (None, "must be an integer")])
def test_a_bad_n_is_refused_naming_the_field(n, message):
    with pytest.raises(WorkloadError) as e:
        parse_workload({"requests": [req("R1"), req("R2", n=n)]})
    assert e.value.field == "requests[1].n" and message in str(e.value)


@pytest.mark.parametrize("requests, field, words", [
    ([req("R3·2"), req("R3", n=2)], "requests[1].id", ["'R3·2'", "another request"]),   # a sample's id is taken
    ([req("R3", n=2), req("R3·1")], "requests[1].id", ["duplicate", "'R3·1'"]),          # ...or taken later
    ([req("R3", n=2), req("R3")], "requests[1].id", ["duplicate", "'R3'"]),              # the group's own id
    ([req("x" * 31, n=2)], "requests[0].id", ["33 characters", "limit is 32"]),
    ([req(f"R{i}", n=8) for i in range(5)], "requests[4].n", ["40 requests", "limit is 32"]),
    ([req("R1", seed=1.5)], "requests[0].seed", ["integer"]),
    ([req("R1", temperature=3)], "requests[0].temperature", ["from 0 to 2"]),
])
def test_siblings_that_cannot_exist_are_refused_naming_the_field(requests, field, words):
    with pytest.raises(WorkloadError) as e:
        parse_workload({"requests": requests})
    assert e.value.field == field and all(w in str(e.value) for w in words), str(e.value)


def test_the_cli_limits_allow_more_samples():
    assert len(parse_workload({"requests": [req("R1", n=64)]}, Limits(max_requests=100, max_n=64)).requests) == 64


def test_a_refusal_that_needs_the_tokenizer_names_the_written_request_not_the_expanded_one():
    engine = Engine(None, Limits(max_prompt_tokens=40))
    wl = parse_workload({"requests": [req("R1", n=4), {"id": "R2", "prompt": "word " * 80, "max_new_tokens": 4}]})
    with pytest.raises(WorkloadError) as e:
        engine.prepare(wl)
    assert e.value.field == "requests[1].prompt"
    budget = parse_workload({"kv_budget": 64, "requests": [req("R1", n=3), req("R2", max_new_tokens=64)]})
    with pytest.raises(WorkloadError) as e:
        engine.prepare(budget)
    assert e.value.field == "requests[1].max_new_tokens"


@pytest.mark.parametrize("lane", ["static", "dynamic", "continuous"])
def test_siblings_run_to_the_end_on_every_lane_under_their_own_ids(lane):
    engine = Engine(None)
    run = engine.start(engine.prepare(parse_workload({"slots": 4, "requests": [req("R1"), req("R3", n=3)]})), [lane])
    run.run_to_end()
    records = run.lanes[lane].records
    seen = {c.request for r in records for c in r.slots if c.request}
    assert seen == {"R1", "R3·1", "R3·2", "R3·3"}
    assert all(r.num_tokens == 4 for r in run.lanes[lane].requests)


@pytest.mark.model
def test_greedy_siblings_each_write_what_the_request_writes_alone(smol):
    requests = [req("R1", max_new_tokens=6), {"id": "R3", "prompt": "Tell me a fact.", "max_new_tokens": 9, "n": 3}]
    run = run_lanes(smol, requests, slots=4, lanes=("static", "continuous"))
    alone = solo_generate(smol, run.workload.requests[1].prompt_ids, 9)
    for name, lane in run.lanes.items():
        got = {r.id: r.output_ids for r in lane.requests}
        assert got["R3·1"] == got["R3·2"] == got["R3·3"] == alone, name


@pytest.mark.model
def test_a_seeded_sampled_sibling_writes_what_the_same_seed_writes_alone(smol):
    ask = {"id": "R3", "prompt": "Tell a story.", "max_new_tokens": 12, "temperature": 1.0}
    together = run_lanes(smol, [req("R1", max_new_tokens=5), {**ask, "n": 3, "seed": 40}], slots=4,
                         lanes=("continuous",))
    got = {r.id: r.output_ids for r in together.lanes["continuous"].requests}
    for i in (1, 2, 3):
        alone = run_lanes(smol, [{**ask, "seed": 40 + i - 1}], slots=1, lanes=("continuous",))
        assert got[f"R3·{i}"] == alone.lanes["continuous"].requests[0].output_ids, i
    assert len({tuple(v) for k, v in got.items() if k != "R1"}) == 3   # three seeds, three different samples


def test_siblings_share_their_prompts_full_blocks_by_reference_and_copy_the_last_one():
    engine = Engine(None)
    wl = engine.prepare(parse_workload({"slots": 4, "requests": [
        {"id": "R3", "prompt": "word " * 30, "max_new_tokens": 6, "n": 3}]}))   # 67 prompt tokens: 4 full blocks
    lane = engine.start(wl, ["continuous"]).lanes["continuous"]
    lane.step()                                    # the leader R3·1 computes the prompt
    lane.step()                                    # its siblings fork it, each recomputing the prompt's last token
    blocks = lane.scheduler.blocks
    tables = [blocks.tables[f"R3·{i}"] for i in (1, 2, 3)]
    full = len(wl.requests[0].prompt_ids) // blocks.block_size
    assert full == 4 and tables[0][:full] == tables[1][:full] == tables[2][:full]
    assert [blocks.refs[b] for b in tables[0][:full]] == [3] * full          # refcount n
    lasts = {t[full] for t in tables}
    assert len(lasts) == 3 and all(blocks.refs[b] == 1 for b in lasts)        # copy-on-write: one last block each
    assert blocks.num_used == full + 3                                        # 7 blocks, not 3 x 5


def test_the_run_announces_the_siblings_the_page_draws():
    """tests/golden/siblings.json is what the engine announces (run_started's `requests`) and what
    tests/js/core/siblings.test.mjs feeds the page: the page expands nothing itself."""
    import json

    from engine.workload.announce import announced
    from tests.kit import ROOT

    fixture = json.loads((ROOT / "tests" / "golden" / "siblings.json").read_text())
    assert announced(parse_workload(fixture["written"]))["requests"] == fixture["expanded"]
