"""The OpenAI endpoint's `n` as one group of siblings on the live lane (engine.workload.siblings): ids `L5·1` ... `L5·n`,
`index` on every streamed chunk, a finish per choice, usage with the prompt once, every sibling cancelled when
the client leaves (simulator); on the real model, greedy siblings equal n = 1 and a seeded sample j equals
n = 1 with seed + j (completions and chat, streamed and whole)."""
import json
import time

import openai
import pytest

from engine import Engine


CHAT = [{"role": "user", "content": "Tell me a fact."}]


def sim_app(make_app, slots: int = 4, pace: float = 0.0):
    return make_app({"LIVE_SLOTS": slots, "PACE": pace}, engine=Engine(None))


def chunks_of(r) -> list[dict]:
    events = [line[6:] for line in r.get_data(as_text=True).split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def live_ids(app) -> list[str]:
    return list(app.extensions["live"].requests)


@pytest.mark.parametrize("path, body", [("/v1/completions", {"prompt": "one two three"}),
                                        ("/v1/chat/completions", {"messages": CHAT})])
def test_n_3_runs_as_three_siblings_of_one_request_on_the_live_lane(make_app, path, body):
    app = sim_app(make_app)
    r = app.test_client().post(path, json={**body, "n": 3, "max_tokens": 4, "ignore_eos": True})
    assert r.status_code == 200, r.json
    assert [c["index"] for c in r.json["choices"]] == [0, 1, 2]
    assert [c["finish_reason"] for c in r.json["choices"]] == ["length"] * 3
    assert live_ids(app) == ["L1·1", "L1·2", "L1·3"]
    groups = {c.request for rec in app.extensions["live"].lane.recent() for c in rec.slots if c.request}
    assert groups == {"L1·1", "L1·2", "L1·3"}
    assert r.json["usage"]["completion_tokens"] == 12
    one = app.test_client().post(path, json={**body, "max_tokens": 4}).json
    assert r.json["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"]    # the prompt counted once
    assert live_ids(app)[-1] == "L2"                                                # n = 1: no group, no "·1"


@pytest.mark.parametrize("path, body", [("/v1/completions", {"prompt": "one two three"}),
                                        ("/v1/chat/completions", {"messages": CHAT})])
def test_n_3_streamed_names_its_choice_on_every_chunk_and_finishes_each(make_app, path, body):
    app = sim_app(make_app)
    r = app.test_client().post(path, json={**body, "n": 3, "max_tokens": 3, "ignore_eos": True, "stream": True,
                                           "stream_options": {"include_usage": True}})
    chunks = chunks_of(r)
    assert all(len(ch["choices"]) == 1 and ch["choices"][0]["index"] in (0, 1, 2) for ch in chunks[:-1])
    finishes = [ch["choices"][0]["index"] for ch in chunks[:-1] if ch["choices"][0]["finish_reason"] == "length"]
    assert sorted(finishes) == [0, 1, 2]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 9
    assert live_ids(app) == ["L1·1", "L1·2", "L1·3"]


def test_a_client_that_leaves_a_stream_of_n_samples_cancels_every_sibling(make_app):
    app = sim_app(make_app, slots=2, pace=1.0)   # steps take their simulated ms; two run, the third waits
    r = app.test_client().post("/v1/chat/completions", json={"messages": CHAT, "n": 3, "max_tokens": 200,
                                                             "ignore_eos": True, "stream": True}, buffered=False)
    first = next(c for c in r.response if c)              # a role chunk with the first token (no text: the simulator)
    assert first.startswith(b"data: ")
    for _ in range(400):                                   # until the first two are writing
        if any(r.summary.tokens for r in app.extensions["live"].requests.values()):
            break
        time.sleep(0.05)
    r.close()                                              # the client is gone
    gateway = app.extensions["live"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(r.summary.stop is None for r in gateway.requests.values()):
        time.sleep(0.05)
    assert {i: r.summary.stop for i, r in gateway.requests.items()} == {f"L1·{i}": "cancelled" for i in (1, 2, 3)}
    assert all(r.summary.tokens < 200 for r in gateway.requests.values())


def test_n_above_the_limit_is_refused_naming_n(make_app):
    r = sim_app(make_app).test_client().post("/v1/completions", json={"prompt": "hi", "n": 9})
    assert r.status_code == 400 and r.json["error"]["param"] == "n" and "1 to 8" in r.json["error"]["message"]


# --- the real model ---

@pytest.fixture(scope="module")
def client(model_server):
    """A client of the session's real-model server (tests/conftest.py's shared_server)."""
    return openai.OpenAI(base_url=f"{model_server}/v1", api_key="unused", max_retries=0, timeout=120)


def streamed(create, **kw) -> tuple[dict[int, str], dict[int, str]]:
    """Each choice's text and finish reason from a stream; asserts every chunk names one choice."""
    text, finish = {}, {}
    for chunk in create(stream=True, **kw):
        assert len(chunk.choices) == 1
        c = chunk.choices[0]
        piece = c.text if hasattr(c, "text") else (c.delta.content or "")
        text[c.index] = text.get(c.index, "") + piece
        if c.finish_reason:
            finish[c.index] = c.finish_reason
    return text, finish


@pytest.mark.model
def test_greedy_siblings_each_write_what_n_1_writes_completions_and_chat(client):
    model = client.models.list().data[0].id
    kw = dict(model=model, prompt="The capital of France is", max_tokens=12, temperature=0)
    alone = client.completions.create(**kw).choices[0].text
    whole = client.completions.create(n=3, **kw)
    assert [c.index for c in whole.choices] == [0, 1, 2] and [c.text for c in whole.choices] == [alone] * 3
    text, finish = streamed(client.completions.create, n=3, **kw)
    assert text == {0: alone, 1: alone, 2: alone} and set(finish) == {0, 1, 2}
    chat = dict(model=model, messages=CHAT, max_tokens=12, temperature=0)
    alone = client.chat.completions.create(**chat).choices[0].message.content
    whole = client.chat.completions.create(n=3, **chat)
    assert [c.message.content for c in whole.choices] == [alone] * 3
    assert whole.usage.prompt_tokens == client.chat.completions.create(**chat).usage.prompt_tokens
    text, finish = streamed(client.chat.completions.create, n=3, **chat)
    assert text == {0: alone, 1: alone, 2: alone} and set(finish) == {0, 1, 2}


@pytest.mark.model
def test_a_seeded_sample_j_writes_what_n_1_writes_with_seed_plus_j(client):
    model = client.models.list().data[0].id
    kw = dict(model=model, messages=[{"role": "user", "content": "Tell a story."}], max_tokens=10, temperature=1.0)
    whole = client.chat.completions.create(n=3, seed=11, **kw)
    alone = [client.chat.completions.create(seed=11 + j, **kw).choices[0].message.content for j in range(3)]
    assert [c.message.content for c in whole.choices] == alone and len(set(alone)) == 3
    text, _ = streamed(client.chat.completions.create, n=3, seed=11, **kw)
    assert text == dict(enumerate(alone))


def test_a_page_submit_with_n_runs_siblings_and_a_bad_n_is_answered_naming_the_field(make_app, connect):
    probe = connect(sim_app(make_app))
    request = {"id": "R1", "prompt": "Say hi.", "max_new_tokens": 2}
    probe.emit("submit", {"workload": {"name": "bad", "requests": [{**request, "n": 99}]}})
    error = probe.wait_for("run_error")
    assert error["field"] == "requests[0].n" and "1 to 8" in error["message"]
    probe.emit("submit", {"workload": {"name": "two", "requests": [{**request, "n": 2}]}})
    started = probe.wait_for("run_started")
    assert [(q["id"], q.get("n")) for q in started["workload"]["requests"]] == [("R1", 2)]   # as written
    assert sorted(started["prompt_tokens"]) == ["R1·1", "R1·2"]                               # as run
