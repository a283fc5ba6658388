"""The OpenAI endpoint's parameters with the official `openai` client against `python -m app` on the real model:
logprobs equal to transformers' own scores (completions and chat, whole and streamed), echo with prompt
logprobs as lm-eval-harness asks for them, token-id and batched prompts with n samples each, min_tokens,
cached_tokens from the live lane's prefix cache, continuous usage, and every refusal a 400 naming its parameter."""
import json
import re
import urllib.request

import openai
import pytest
import torch

TOL = 2e-3   # logprobs: the live lane's kernels against transformers' forward, float32
FRANCE = "The capital of France is"


@pytest.fixture(scope="module")
def server(model_server):
    """The session's real-model server (tests/conftest.py's shared_server): these tests read only their own requests."""
    return model_server


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(client) -> str:
    return client.models.list().data[0].id


def generate_scores(lm, ids: list[int], n: int) -> tuple[list[int], list[torch.Tensor]]:
    """transformers' own greedy generate(): the n tokens it writes and the log_softmax of each step's raw logits
    (`output_logits`: its `scores` are after min_new_tokens' EOS mask, which renormalizes)."""
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                                do_sample=False, output_logits=True, return_dict_in_generate=True,
                                pad_token_id=lm.pad_id)
    return out.sequences[0, len(ids):].tolist(), [torch.log_softmax(s[0].float(), -1) for s in out.logits]


def prompt_scores(lm, ids: list[int]) -> torch.Tensor:
    """log_softmax of one plain forward over `ids` (row p scores the token at p + 1). (T, V)"""
    with torch.inference_mode():
        return torch.log_softmax(lm.model(torch.tensor([ids])).logits[0].float(), -1)


def post(server, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(server + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.model
def test_completion_logprobs_equal_transformers_scores_whole_and_streamed(client, model, smol):
    ids = smol.tokenizer.encode(FRANCE)
    tokens, scores = generate_scores(smol, ids, 4)
    r = client.completions.create(model=model, prompt=ids, max_tokens=4, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert lp.tokens == [smol.tokenizer.decode([t]) for t in tokens]
    for j, t in enumerate(tokens):
        assert lp.token_logprobs[j] == pytest.approx(scores[j][t].item(), abs=TOL)
        top = scores[j].topk(3)
        want = {smol.tokenizer.decode([i]): v for i, v in zip(top.indices.tolist(), top.values.tolist())}
        assert set(lp.top_logprobs[j]) == set(want) | {lp.tokens[j]}      # the top 3 and the chosen token
        for name, v in want.items():
            assert lp.top_logprobs[j][name] == pytest.approx(v, abs=TOL)
    streamed = [c.choices[0] for c in client.completions.create(model=model, prompt=ids, max_tokens=4, temperature=0,
                                                                logprobs=3, stream=True) if c.choices]
    got = [v for c in streamed if c.logprobs for v in c.logprobs.token_logprobs]
    assert got == pytest.approx(lp.token_logprobs, abs=1e-5) and "".join(c.text for c in streamed) == r.choices[0].text


@pytest.mark.model
def test_chat_logprobs_and_top_logprobs_equal_transformers_scores(client, model, smol):
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    tokens, scores = generate_scores(smol, smol.encode_messages(messages), 3)
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=3, temperature=0, logprobs=True,
                                       top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert [c.token for c in content] == [smol.tokenizer.decode([t]) for t in tokens]
    for c, t, s in zip(content, tokens, scores):
        assert c.logprob == pytest.approx(s[t].item(), abs=TOL) and c.bytes == list(c.token.encode())
        assert [x.logprob for x in c.top_logprobs] == pytest.approx(s.topk(2).values.tolist(), abs=TOL)
    plain = client.chat.completions.create(model=model, messages=messages, max_tokens=3, temperature=0)
    assert plain.choices[0].logprobs is None and plain.choices[0].message.content == r.choices[0].message.content
    chunks = list(client.chat.completions.create(model=model, messages=messages, max_tokens=3, temperature=0,
                                                 logprobs=True, top_logprobs=0, stream=True))
    got = [c.logprob for ch in chunks if ch.choices and ch.choices[0].logprobs for c in ch.choices[0].logprobs.content]
    # the stream's request meets the prefix cache: its prompt's tail is computed in a smaller call than the first
    # request's whole prompt (other kernels, float noise ~1e-5), so it is held to transformers' scores as the first is
    assert got == pytest.approx([s[t].item() for t, s in zip(tokens, scores)], abs=TOL)


@pytest.mark.model
def test_echo_scores_the_prompt_as_lm_eval_harness_asks(server, smol):
    """lm-eval's local-completions log-likelihood request: prompts as id lists, echo, logprobs=1, max_tokens=1."""
    context = smol.tokenizer.encode("The capital of France is")
    batch = [context + smol.tokenizer.encode(" Paris"), context + smol.tokenizer.encode(" a big city")]
    status, r = post(server, "/v1/completions", {"prompt": batch, "echo": True, "logprobs": 1, "max_tokens": 1,
                                                  "temperature": 0, "seed": 1234})
    assert status == 200 and [c["index"] for c in r["choices"]] == [0, 1]
    for ids, choice in zip(batch, sorted(r["choices"], key=lambda c: c["index"])):
        lp, ref = choice["logprobs"], prompt_scores(smol, ids)
        assert len(lp["token_logprobs"]) == len(ids) + 1 and lp["token_logprobs"][0] is None
        assert lp["top_logprobs"][0] is None and lp["text_offset"][0] == 0
        for p in range(1, len(ids)):
            assert lp["token_logprobs"][p] == pytest.approx(ref[p - 1, ids[p]].item(), abs=TOL)
    paris = r["choices"][0]["logprobs"]                             # lm-eval's is_greedy: the top token is the one
    top = paris["top_logprobs"][len(context)]
    assert max(top, key=top.get) == paris["tokens"][len(context)] == " Paris"
    continuation = [sum(c["logprobs"]["token_logprobs"][len(context):-1]) for c in r["choices"]]
    assert continuation[0] > continuation[1]                        # " Paris" is likelier than " a big city"
    assert r["usage"]["prompt_tokens"] == sum(map(len, batch)) and r["usage"]["completion_tokens"] == 2
    status, only = post(server, "/v1/completions", {"prompt": FRANCE, "echo": True, "max_tokens": 0, "logprobs": 0})
    assert status == 200 and only["choices"][0]["text"] == FRANCE and only["usage"]["completion_tokens"] == 0
    assert len(only["choices"][0]["logprobs"]["tokens"]) == len(smol.tokenizer.encode(FRANCE))


@pytest.mark.model
def test_batched_prompts_and_n_give_every_choice_its_index_whole_and_streamed(client, model, smol):
    prompts = [FRANCE, smol.tokenizer.encode("Once upon a time")]
    r = client.completions.create(model=model, prompt=prompts, n=2, max_tokens=5, temperature=0)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].text == r.choices[1].text and r.choices[2].text == r.choices[3].text  # greedy samples agree
    assert r.choices[0].text != r.choices[2].text
    assert r.usage.prompt_tokens == len(smol.tokenizer.encode(FRANCE)) + len(prompts[1])  # each prompt once
    assert r.usage.completion_tokens == 20
    text: dict[int, str] = {}
    for chunk in client.completions.create(model=model, prompt=prompts, n=2, max_tokens=5, temperature=0, stream=True):
        for c in chunk.choices:
            text[c.index] = text.get(c.index, "") + c.text
    assert text == {c.index: c.text for c in r.choices}
    sampled = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Tell a story."}],
                                             n=3, max_tokens=8, temperature=1.0, seed=7)
    assert [c.index for c in sampled.choices] == [0, 1, 2] and len({c.message.content for c in sampled.choices}) > 1
    again = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Tell a story."}],
                                           n=3, max_tokens=8, temperature=1.0, seed=7)
    assert [c.message.content for c in again.choices] == [c.message.content for c in sampled.choices]


@pytest.mark.model
def test_min_tokens_holds_eos_back_and_seeds_span_int64(client, model):
    messages = [{"role": "user", "content": "Say hi."}]
    short = client.chat.completions.create(model=model, messages=messages, max_tokens=60, temperature=0)
    assert short.choices[0].finish_reason == "stop" and short.usage.completion_tokens < 40
    held = client.chat.completions.create(model=model, messages=messages, max_tokens=60, temperature=0,
                                          extra_body={"min_tokens": short.usage.completion_tokens + 10})
    assert held.usage.completion_tokens >= short.usage.completion_tokens + 10
    for seed in (2 ** 63 - 1, -2 ** 63):
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=2, seed=seed)
        assert r.usage.completion_tokens == 2


@pytest.mark.model
def test_a_repeated_prompt_reports_cached_tokens_and_continuous_usage_counts_up(client, model):
    prompt = "Here is a long shared system prompt that many requests repeat word for word, about " * 3
    first = client.completions.create(model=model, prompt=prompt + "cats.", max_tokens=2, temperature=0)
    second = client.completions.create(model=model, prompt=prompt + "dogs.", max_tokens=2, temperature=0)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached > 0 and cached % 16 == 0 and cached < second.usage.prompt_tokens
    chunks = list(client.completions.create(model=model, prompt=FRANCE, max_tokens=6, temperature=0, stream=True,
                                            stream_options={"include_usage": True, "continuous_usage_stats": True}))
    counts = [c.usage.completion_tokens for c in chunks]
    assert all(c.usage is not None for c in chunks) and counts == sorted(counts) and counts[-1] == 6
    assert not chunks[-1].choices


@pytest.mark.model
@pytest.mark.parametrize("path, change, param", [
    ("/v1/completions", {"logprobs": 21}, "logprobs"), ("/v1/completions", {"logprobs": True}, "logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"), ("/v1/chat/completions", {"n": 9}, "n"),
    ("/v1/chat/completions", {"stream_options": {"include_usage": True}}, "stream_options"),
    ("/v1/chat/completions", {"seed": 2 ** 63}, "seed"), ("/v1/chat/completions", {"seed": -2 ** 63 - 1}, "seed"),
    ("/v1/chat/completions", {"response_format": {"type": "xml"}}, "response_format"),
    ("/v1/chat/completions", {"response_format": {"type": "json_object"}, "ignore_eos": True}, "ignore_eos"),
    ("/v1/chat/completions", {"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ("/v1/chat/completions", {"echo": True}, "echo"), ("/v1/completions", {"best_of": 3}, "best_of"),
    ("/v1/completions", {"prompt": [[1, 2, 10 ** 9]]}, "prompt"), ("/v1/completions", {"prompt": [[]]}, "prompt"),
    ("/v1/completions", {"prompt": ["a"] * 33}, "prompt"), ("/v1/completions", {"min_tokens": 17}, "min_tokens"),
    ("/v1/completions", {"max_tokens": 0}, "max_tokens")])
def test_every_refusal_is_a_400_naming_its_param(server, model, path, change, param):
    base = {"messages": [{"role": "user", "content": "hi"}]} if "chat" in path else {"prompt": "hi"}
    status, error = post(server, path, {"model": model, **base, **change})
    assert status == 400 and error["error"]["param"] == param, error
    if param == "tools":
        assert "constrained decoding" in error["error"]["message"]


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"enum": ["France", "Spain"]}},
          "required": ["city", "country"], "additionalProperties": False}


@pytest.mark.model
def test_a_json_schema_response_keeps_to_the_schema_and_ends_at_its_end(client, model, server):
    messages = [{"role": "user", "content": "Give the capital of France as JSON."}]
    fmt = {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA}}
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=60, temperature=0, response_format=fmt)
    place = json.loads(r.choices[0].message.content)
    assert set(place) == {"city", "country"} and place["country"] in ("France", "Spain")
    assert r.choices[0].finish_reason == "stop"
    free = client.chat.completions.create(model=model, messages=messages, max_tokens=20, temperature=0)
    assert not free.choices[0].message.content.startswith("{")  # unconstrained, the model opens with a code fence
    anyjson = client.chat.completions.create(model=model, messages=messages, max_tokens=20, temperature=0,
                                             response_format={"type": "json_object"})
    assert anyjson.choices[0].message.content.startswith("{")
    status, error = post(server, "/v1/chat/completions", {"model": model, "messages": messages, "response_format": {
        "type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "nonsense"}}}})
    assert status == 400 and error["error"]["param"] == "response_format"


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}


@pytest.mark.model
def test_a_person_schema_a_choice_a_regex_and_a_named_tool_come_back_as_asked_from_the_default_install(client, model):
    messages = [{"role": "user", "content": "Describe a person as JSON with their name and age."}]
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=40, temperature=0, response_format=fmt)
    person = json.loads(r.choices[0].message.content)
    assert isinstance(person["name"], str) and isinstance(person["age"], int) and r.choices[0].finish_reason == "stop"
    again = client.chat.completions.create(model=model, messages=messages, max_tokens=40, temperature=0, response_format=fmt)
    assert again.choices[0].message.content == r.choices[0].message.content   # greedy: the same JSON every time
    pick = [{"role": "user", "content": "Is Paris in France? Answer yes or no."}]
    r = client.chat.completions.create(model=model, messages=pick, max_tokens=5, temperature=0,
                                       extra_body={"structured_outputs": {"choice": ["yes", "no"]}})
    assert r.choices[0].message.content in ("yes", "no")
    r = client.completions.create(model=model, prompt="The year the Eiffel Tower opened:", max_tokens=8, temperature=0,
                                  extra_body={"structured_outputs": {"regex": "1[0-9]{3}"}})
    assert re.fullmatch("1[0-9]{3}", r.choices[0].text)
    weather = {"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    r = client.chat.completions.create(model=model, max_tokens=20, temperature=0, tools=[weather], messages=[
        {"role": "user", "content": "What is the weather in Paris?"}],
        tool_choice={"type": "function", "function": {"name": "weather"}})
    (call,) = r.choices[0].message.tool_calls
    assert call.function.name == "weather" and isinstance(json.loads(call.function.arguments)["city"], str)


# --- the fast tier: the same parsing and choice building on the simulator (no model) ---

def sim_client(make_app):
    from engine import Engine
    return make_app({"LIVE_SLOTS": 4}, engine=Engine(None)).test_client()


def test_n_samples_of_several_prompts_come_back_indexed_with_usage_summed_on_the_simulator(make_app):
    c = sim_client(make_app)
    r = c.post("/v1/completions", json={"prompt": ["one two three", "four"], "n": 3, "max_tokens": 4,
                                        "ignore_eos": True})
    assert r.status_code == 200, r.json
    body = r.json
    assert [ch["index"] for ch in body["choices"]] == list(range(6))
    assert body["usage"]["completion_tokens"] == 24 and body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    one = [c.post("/v1/completions", json={"prompt": p, "max_tokens": 1}).json["usage"]["prompt_tokens"]
           for p in ("one two three", "four")]
    assert body["usage"]["prompt_tokens"] == sum(one)           # each prompt counted once, not once per sample


def test_a_streamed_request_of_two_samples_names_its_choice_on_every_chunk_on_the_simulator(make_app):
    c = sim_client(make_app)
    r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "n": 2, "max_tokens": 3,
                                             "ignore_eos": True, "stream": True,
                                             "stream_options": {"include_usage": True}})
    events = [line[6:] for line in r.get_data(as_text=True).split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(len(ch["choices"]) == 1 for ch in chunks[:-1]) and chunks[-1]["choices"] == []
    finishes = {ch["choices"][0]["index"]: ch["choices"][0]["finish_reason"] for ch in chunks[:-1]
                if ch["choices"][0]["finish_reason"]}
    assert finishes == {0: "length", 1: "length"} and chunks[-1]["usage"]["completion_tokens"] == 6


@pytest.mark.parametrize("body, param", [
    ({"prompt": "hi", "logprobs": 1}, "logprobs"), ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": "hi", "stream_options": {"include_usage": True}}, "stream_options"),
    ({"prompt": "hi", "stream": True, "stream_options": {"continuous_usage_stats": "yes"}}, "stream_options"),
    ({"prompt": "hi", "n": 0}, "n"), ({"prompt": "hi", "seed": 2 ** 63}, "seed"),
    ({"prompt": "hi", "response_format": {"type": "json_schema"}}, "response_format")])
def test_refusals_on_the_simulator_name_their_param(make_app, body, param):
    r = sim_client(make_app).post("/v1/completions", json=body)
    assert r.status_code == 400 and r.json["error"]["param"] == param, r.json
