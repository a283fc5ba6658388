"""Structured output through the OpenAI endpoint (`response_format`, vLLM's `structured_outputs`), on the tiny
random-weight model in this process, whose every pick the grammar steers: a choice comes back exactly, whole or
streamed, for each of n samples; a regex matches whole; JSON keeps to its schema and ends with "stop", or with
"length" when max_tokens cuts it; a bad schema, regex, choice or grammar is a 400 naming its parameter, as is any
constraint on the simulator. A named tool_choice returns one tool call whose arguments keep to the function's
parameters; "required" returns calls of the given tools; a call max_tokens cuts short is none."""
import json
import re
from dataclasses import replace

import pytest

from engine import Engine

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
CHAT = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 40}
COLOURS = ["red", "green", "blue"]


@pytest.fixture(scope="module")
def c(tiny, tmp_path_factory):
    from app.web.factory import create_app

    lm = replace(tiny, eos_ids=frozenset({2}))   # the tiny model names no EOS: its tokenizer's <|im_end|> is it here
    app = create_app({"DATA_DIR": tmp_path_factory.mktemp("structured"), "LIVE_SLOTS": 4}, engine=Engine(lm))
    yield app.test_client()
    app.extensions["worker"].stop()


def streamed(r) -> dict[int, tuple[str, str]]:
    """A streamed chat's choices: index -> (content, finish_reason)."""
    got: dict[int, list] = {}
    for event in r.get_data(as_text=True).split("\n\n"):
        if event.startswith("data: {"):
            for ch in json.loads(event[6:])["choices"]:
                seen = got.setdefault(ch["index"], ["", None])
                seen[0] += ch["delta"].get("content") or ""
                seen[1] = ch["finish_reason"] or seen[1]
    return {i: tuple(v) for i, v in got.items()}


def test_a_choice_is_exactly_one_of_the_choices_for_each_of_n_samples_whole_and_streamed(c):
    body = {**CHAT, "n": 3, "temperature": 1.0, "seed": 5, "structured_outputs": {"choice": COLOURS}}
    whole = c.post("/v1/chat/completions", json=body).json["choices"]
    assert [(ch["message"]["content"] in COLOURS, ch["finish_reason"]) for ch in whole] == [(True, "stop")] * 3
    again = streamed(c.post("/v1/chat/completions", json={**body, "stream": True}))
    assert [again[i] for i in range(3)] == [(ch["message"]["content"], "stop") for ch in whole]  # seeded: the same


def test_a_regex_matches_the_whole_completion(c):
    r = c.post("/v1/completions", json={"prompt": "A code:", "max_tokens": 12, "temperature": 0,
                                        "structured_outputs": {"regex": r"[0-9]{3}-[a-z]{2}"}}).json
    assert re.fullmatch(r"[0-9]{3}-[a-z]{2}", r["choices"][0]["text"]) and r["choices"][0]["finish_reason"] == "stop"


def test_a_json_schema_response_keeps_to_the_schema_and_one_cut_by_max_tokens_ends_with_length(c):
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    r = c.post("/v1/chat/completions", json={**CHAT, "temperature": 0, "response_format": fmt}).json["choices"][0]
    person = json.loads(r["message"]["content"])
    assert set(person) == {"name", "age"} and isinstance(person["name"], str) and isinstance(person["age"], int)
    assert r["finish_reason"] == "stop"
    cut = c.post("/v1/chat/completions", json={**CHAT, "max_tokens": 3, "response_format": fmt}).json["choices"][0]
    assert cut["finish_reason"] == "length" and cut["message"]["content"].startswith('{"')
    anything = c.post("/v1/chat/completions", json={**CHAT, "response_format": {"type": "json_object"}}).json
    assert isinstance(json.loads(anything["choices"][0]["message"]["content"]), dict)


TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 8}}, "required": ["city"], "additionalProperties": False}}},
         {"type": "function", "function": {"name": "now"}}]


def test_a_named_tool_choice_returns_one_call_whose_arguments_keep_to_its_parameters_whole_and_streamed(c):
    body = {**CHAT, "temperature": 0, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "lookup"}}}
    r = c.post("/v1/chat/completions", json=body).json["choices"][0]
    (call,) = r["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "lookup" and call["id"].startswith("chatcmpl-tool-")
    assert set(json.loads(call["function"]["arguments"])) == {"city"} and r["message"]["content"] == ""
    deltas = [json.loads(e[6:])["choices"][0]["delta"] for e in c.post("/v1/chat/completions", json={
        **body, "stream": True}).get_data(as_text=True).split("\n\n") if e.startswith("data: {")]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0]["function"]["name"] == "lookup" and calls[0]["id"].startswith("chatcmpl-tool-")
    assert "".join(c["function"]["arguments"] for c in calls) == call["function"]["arguments"]


def test_tool_choice_required_returns_calls_of_the_given_tools_whole_and_streamed_and_none_when_cut(c):
    body = {**CHAT, "max_tokens": 60, "temperature": 0, "tools": TOOLS, "tool_choice": "required"}
    r = c.post("/v1/chat/completions", json=body).json["choices"][0]
    calls = r["message"]["tool_calls"]
    assert calls and r["message"]["content"] == "" and r["finish_reason"] == "stop"
    for call in calls:
        assert call["type"] == "function" and call["id"].startswith("chatcmpl-tool-")
        args = json.loads(call["function"]["arguments"])
        assert call["function"]["name"] in ("lookup", "now") and isinstance(args, dict)
        assert call["function"]["name"] == "now" or (set(args) == {"city"} and len(args["city"]) <= 8)
    deltas = [ch["delta"] for e in c.post("/v1/chat/completions", json={**body, "stream": True}).get_data(
        as_text=True).split("\n\n") if e.startswith("data: {") for ch in json.loads(e[6:])["choices"]]
    streamed = [t for d in deltas for t in d.get("tool_calls", [])]
    assert [(t["index"], t["function"]["name"], t["function"]["arguments"]) for t in streamed] == \
        [(i, t["function"]["name"], t["function"]["arguments"]) for i, t in enumerate(calls)]   # greedy: the same calls
    assert not any(d.get("content") for d in deltas)
    for choice in ("required", {"type": "function", "function": {"name": "lookup"}}):   # cut: no call, as vLLM answers
        cut = c.post("/v1/chat/completions", json={**body, "max_tokens": 1, "tool_choice": choice}).json["choices"][0]
        assert cut["finish_reason"] == "length" and "tool_calls" not in cut["message"] and cut["message"]["content"] == ""


@pytest.mark.parametrize("change, param, words", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}},
     "response_format", "nonsense"),
    ({"structured_outputs": {"json": "{not json"}}, "structured_outputs", "not JSON"),
    ({"structured_outputs": {"regex": "a(b"}}, "structured_outputs", "unclosed group"),
    ({"structured_outputs": {"choice": []}}, "structured_outputs", "non-empty list"),
    ({"structured_outputs": {"grammar": "start: undefined_rule"}}, "structured_outputs", "undefined_rule"),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs", "exactly one"),
    ({"structured_outputs": {"regex": "a"}, "response_format": {"type": "json_object"}}, "structured_outputs",
     "no response_format"),
    ({"structured_outputs": "a+"}, "structured_outputs", "an object"),
    ({"guided_json": PERSON}, "guided_json", "structured_outputs"),
    ({"structured_outputs": {"json_object": True}, "min_tokens": 2}, "min_tokens", "grammar ends"),
    ({"tools": TOOLS}, "tools", "tool_choice"), ({"tools": TOOLS, "tool_choice": "auto"}, "tool_choice", "parsed"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "'nope'"),
    ({"tool_choice": {"type": "function", "function": {"name": "now"}}}, "tool_choice", "no tools")])
def test_a_bad_constraint_is_a_400_naming_its_parameter(c, change, param, words):
    r = c.post("/v1/chat/completions", json={**CHAT, **change})
    assert r.status_code == 400 and r.json["error"]["param"] == param and words in r.json["error"]["message"], r.json


def test_a_constraint_on_the_simulator_is_a_400_naming_its_parameter(make_app):
    c = make_app({"LIVE_SLOTS": 2}, engine=Engine(None)).test_client()
    r = c.post("/v1/chat/completions", json={**CHAT, "response_format": {"type": "json_object"}})
    assert r.status_code == 400 and r.json["error"]["param"] == "response_format"
    assert "simulator" in r.json["error"]["message"]
