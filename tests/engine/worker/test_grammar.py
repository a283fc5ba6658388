"""Structured output on the live lane (engine.worker.grammar, llguidance), on the tiny random-weight model whose
every pick the grammar steers: each token a constrained row writes is one its grammar allowed, so a choice comes
back exactly, a regex matches whole, JSON parses and keeps to its schema, then EOS ends the request; greedy is
the same text every time; a row without a grammar writes what it writes alone, and one cut by max_tokens ends
mid-text."""
import json
import re
from dataclasses import replace

import pytest

from engine import Engine
from engine.live import LiveLane
from engine.request import RequestSpec
from engine.structured import grammar

from tests.kit.reference import solo_generate

EOS = 2   # the tiny tokenizer's <|im_end|>: the tiny model names no EOS of its own, these tests name this one
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def lm(tiny):
    return replace(tiny, eos_ids=frozenset({EOS}))


def spec(lm, i: int, n: int, constraint: tuple | None = None, prompt: str = "Say hi.", **kw) -> RequestSpec:
    return RequestSpec(id=f"L{i}", prompt=prompt, max_new_tokens=n, prompt_ids=tuple(lm.encode_prompt(prompt)),
                       ignore_eos=False, grammar=grammar(*constraint) if constraint else None, **kw)


def drive(lm, specs: list[RequestSpec]) -> dict:
    """`specs` submitted together on a fresh live lane, stepped until all are done: each request as it ended."""
    lane, done = LiveLane(Engine(lm), slots=4), {}
    add = lane.scheduler.add
    lane.scheduler.add = lambda s: done.setdefault(s.id, add(s))
    for s in specs:
        lane.submit(s, lambda rec, cell: None)
    while lane.has_work():
        lane.step()
        lane.notify()
    return done


def text(lm, request) -> str:
    """What a request wrote up to its closing EOS, which must be there."""
    assert request.output_ids[-1] == EOS, lm.decode(request.output_ids)
    return lm.decode(request.output_ids[:-1])


def test_choice_regex_and_schema_rows_keep_to_their_grammars_beside_a_free_row_that_writes_what_it_would_alone(lm):
    colours = ["red", "green", "blue"]
    got = drive(lm, [spec(lm, 1, 12, ("choice", colours)),
                     spec(lm, 2, 12, ("choice", colours), temperature=1.0, seed=7),
                     spec(lm, 3, 16, ("regex", r"[0-9]{3}-[a-z]{2}")),
                     spec(lm, 4, 10, prompt="Name a colour.")])
    assert text(lm, got["L1"]) in colours and text(lm, got["L2"]) in colours
    assert re.fullmatch(r"[0-9]{3}-[a-z]{2}", text(lm, got["L3"]))
    assert got["L4"].output_ids == solo_generate(lm, got["L4"].spec.prompt_ids, 10)
    assert got["L4"].matcher is None   # a free row never meets llguidance


def test_json_keeps_to_its_schema_and_greedy_writes_the_same_json_every_time(lm):
    asked = [spec(lm, i, 40, ("json", PERSON), prompt=p) for i, p in enumerate(["Who are you?", "Who are you?", "Hi."])]
    got = drive(lm, asked)
    people = [json.loads(text(lm, got[f"L{i}"])) for i in range(3)]
    for person in people:
        assert set(person) == {"name", "age"} and isinstance(person["name"], str) and len(person["name"]) <= 6
        assert isinstance(person["age"], int) and 0 <= person["age"] <= 120
    assert got["L0"].output_ids == got["L1"].output_ids
    assert drive(lm, asked[:1])["L0"].output_ids == got["L0"].output_ids   # alone or batched, the same


def test_json_cut_by_max_tokens_ends_mid_object_and_any_object_opens_with_a_brace(lm):
    got = drive(lm, [spec(lm, 1, 3, ("json", PERSON)), spec(lm, 2, 8, ("json_object", None), prompt="Hi.")])
    assert len(got["L1"].output_ids) == 3 and EOS not in got["L1"].output_ids
    assert lm.decode(got["L1"].output_ids).startswith('{"')
    assert isinstance(json.loads(text(lm, got["L2"])), dict)
