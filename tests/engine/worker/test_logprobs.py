"""Logprobs, prompt logprobs (echo), min_tokens and the prefix cache on the live lane, from the runner's own logits:
each written token's logprob and top-k equal a plain forward's log_softmax over prompt + output, rows that did not
ask carry none, a request short of min_tokens cannot write EOS, and a repeated prompt is served from the cache."""
from dataclasses import replace

import pytest
import torch

from engine import Engine
from engine.live import LiveLane
from engine.request import RequestSpec

from tests.kit.reference import solo_generate

LONG = "Write one long sentence about the history of the Roman empire, its roads, its aqueducts and its legions."


def spec(lm, i: int, prompt: str, n: int, **kw) -> RequestSpec:
    return RequestSpec(id=f"L{i}", prompt=prompt, max_new_tokens=n, prompt_ids=tuple(lm.encode_prompt(prompt)), **kw)


def drive(lane: LiveLane, specs: list[RequestSpec]) -> dict:
    """Submit `specs` together, step until all are done; every request as it ended (the lane's own `Request`s: its
    listeners hear only records)."""
    done, add = {}, lane.scheduler.add

    def kept(spec: RequestSpec):
        done[spec.id] = add(spec)
        return done[spec.id]
    lane.scheduler.add = kept
    for s in specs:
        lane.submit(s, lambda rec, cell: None)
    while lane.has_work():
        lane.step()
        lane.notify()
    return done


def plain_logprobs(lm, ids: list[int]) -> torch.Tensor:
    """log_softmax of one plain transformers forward over `ids`: row p scores the token at p + 1. (T, V)"""
    with torch.inference_mode():
        return torch.log_softmax(lm.model(torch.tensor([ids])).logits[0].float(), -1)


def check_entries(lm, request, k: int) -> None:
    ids = list(request.spec.prompt_ids) + request.output_ids
    ref = plain_logprobs(lm, ids)
    n0 = len(request.spec.prompt_ids)
    assert len(request.token_logprobs) == request.num_tokens
    for j, (token, lp, top) in enumerate(request.token_logprobs):
        row = ref[n0 - 1 + j]
        assert token == request.output_ids[j]
        assert lp == pytest.approx(row[token].item(), abs=1e-4)
        assert len(top) == k
        want = row.topk(k)
        assert [t for t, _ in top] == want.indices.tolist()
        assert [v for _, v in top] == pytest.approx(want.values.tolist(), abs=1e-4)


def test_written_tokens_carry_the_models_own_logprobs_and_rows_that_did_not_ask_none(tiny):
    lane = LiveLane(Engine(tiny), slots=4)
    got = drive(lane, [spec(tiny, 1, "Say hi.", 8, logprobs=5), spec(tiny, 2, "Name a colour.", 6),
                       spec(tiny, 3, LONG, 7, logprobs=0, temperature=1.0, seed=3)])
    check_entries(tiny, got["L1"], 5)
    check_entries(tiny, got["L3"], 0)
    assert got["L2"].token_logprobs == [] and got["L2"].prompt_logprobs == []
    assert got["L1"].output_ids == solo_generate(tiny, got["L1"].spec.prompt_ids, 8)  # asking changes no token


def test_prompt_logprobs_score_every_prompt_token_but_the_first_and_skip_the_prefix_cache(tiny):
    lane = LiveLane(Engine(tiny), slots=4)
    drive(lane, [spec(tiny, 1, LONG, 2)])                    # the prompt's blocks are now cached
    got = drive(lane, [spec(tiny, 2, LONG, 2, logprobs=2, prompt_logprobs=2), spec(tiny, 3, LONG, 2)])
    echo, cached = got["L2"], got["L3"]
    assert cached.num_from_cache > 0 and echo.num_from_cache == 0
    prompt = list(echo.spec.prompt_ids)
    ref = plain_logprobs(tiny, prompt)
    assert echo.prompt_logprobs[0] is None and len(echo.prompt_logprobs) == len(prompt)
    for p in range(1, len(prompt)):
        token, lp, top = echo.prompt_logprobs[p]
        assert token == prompt[p] and lp == pytest.approx(ref[p - 1, token].item(), abs=1e-4)
        assert [t for t, _ in top] == ref[p - 1].topk(2).indices.tolist()
    check_entries(tiny, echo, 2)
    assert cached.output_ids == echo.output_ids == solo_generate(tiny, prompt, 2)  # a cache hit writes the same


def test_a_request_short_of_min_tokens_cannot_write_eos(tiny):
    first = solo_generate(tiny, spec(tiny, 0, "Say hi.", 1).prompt_ids, 1)[0]
    lm = replace(tiny, eos_ids=frozenset({first}))           # the token it writes first is now its EOS
    stops = drive(LiveLane(Engine(lm), slots=2), [spec(lm, 1, "Say hi.", 6, ignore_eos=False)])["L1"]
    assert stops.output_ids == [first]
    held = drive(LiveLane(Engine(lm), slots=2), [spec(lm, 1, "Say hi.", 6, ignore_eos=False, min_tokens=3)])["L1"]
    assert held.num_tokens >= 3 and first not in held.output_ids[:3]


def test_the_live_lanes_prefix_cache_stays_within_the_slot_rows_evicting_the_least_recently_used(tiny):
    lane = LiveLane(Engine(tiny), slots=2, row_len=64)      # a budget of 2 rows x 4 blocks of 16
    for i in range(6):                                      # six different 40-token prompts: 2 full blocks each
        ids = tuple(range(10 + 40 * i, 50 + 40 * i))
        drive(lane, [RequestSpec(id=f"L{i}", prompt="", max_new_tokens=4, prompt_ids=ids)])
    prefix = lane.scheduler.prefix
    assert prefix.num_cached <= 8 and prefix.num_evicted >= 4
    again = drive(lane, [RequestSpec(id="L9", prompt="", max_new_tokens=4, prompt_ids=tuple(range(210, 250)))])["L9"]
    assert again.num_from_cache == 32                       # the latest prompt is still cached


def test_cells_carry_their_tokens_logprobs_and_the_first_token_cell_the_prompts(tiny):
    lane = LiveLane(Engine(tiny), slots=2)
    cells = []
    lane.submit(spec(tiny, 1, LONG, 5, logprobs=2, prompt_logprobs=1), lambda rec, cell: cells.append(cell))
    lane.submit(spec(tiny, 2, "Say hi.", 4), lambda rec, cell: cells.append(cell))
    requests, add = {}, lane.scheduler.add
    lane.scheduler.add = lambda s: requests.setdefault(s.id, add(s))
    while lane.has_work():
        lane.step()
        lane.notify()
    asked, plain = requests["L1"], requests["L2"]
    mine = [c for c in cells if c is not None and c.request == "L1"]
    assert [e for c in mine for e in c.logprobs or ()] == asked.token_logprobs and len(asked.token_logprobs) == 5
    with_prompt = [c for c in mine if c.prompt_logprobs is not None]
    assert len(with_prompt) == 1 and with_prompt[0].token_id == asked.output_ids[0]
    assert list(with_prompt[0].prompt_logprobs) == asked.prompt_logprobs and asked.prompt_logprobs[1] is not None
    assert all(c.logprobs is None and c.prompt_logprobs is None for c in cells if c is not None and c.request == "L2")
    assert plain.num_tokens == 4
