"""Conformance behaviours of the server as a whole: models, probes, bodies, errors, cancellation (vLLM's
vllm-project/vllm/tests/entrypoints/openai/basic/test_basic.py, test_models.py, chat_completion/test_non_object_body_validation.py,
completion/test_prompt_validation.py and test_empty_prompt_list.py)."""
import concurrent.futures
import time

import openai

from scripts.conformance_checks import CHAT, Ctx, Fail, SkipCheck, behaviour, ensure, refused


@behaviour("models.list", "GET /v1/models lists the served model (id, object \"model\", owned_by, created)",
           "basic/test_models.py")
def models_list(ctx: Ctx):
    data = ctx.client.models.list().data
    ensure(data and data[0].id == ctx.model and data[0].object == "model", f"got {data}")
    ensure(data[0].owned_by and isinstance(data[0].created, int), "owned_by or created missing")


@behaviour("models.retrieve", "GET /v1/models/{id} answers the model; an unknown id is a 404",
           "basic/test_models.py")
def models_retrieve(ctx: Ctx):
    ensure(ctx.client.models.retrieve(ctx.model).id == ctx.model, "retrieve gave another id")
    refused(lambda: ctx.client.models.retrieve("no-such-model"), 404)


@behaviour("health", "GET /health is 200 once the model is ready", "basic/test_basic.py::test_check_health")
def health(ctx: Ctx):
    r = ctx.http.get("/health")
    ensure(r.status_code == 200, f"status {r.status_code}")


@behaviour("version", "GET /version answers {\"version\": str}", "basic/test_basic.py::test_show_version")
def version(ctx: Ctx):
    r = ctx.http.get("/version")
    ensure(r.status_code == 200 and isinstance(r.json().get("version"), str), f"{r.status_code} {r.text[:80]}")


@behaviour("model.unknown", "a request naming another model is a 404 (NotFoundError)", "test_chat_error.py")
def unknown_model(ctx: Ctx):
    refused(lambda: ctx.client.chat.completions.create(model="no-such-model", messages=CHAT, max_tokens=2), 404)


@behaviour("body.content_type", "a body sent as application/x-www-form-urlencoded is refused (4xx)",
           "basic/test_basic.py::test_request_wrong_content_type")
def wrong_content_type(ctx: Ctx):
    try:
        ctx.client.chat.completions.create(model=ctx.model, messages=CHAT, max_tokens=2,
                                           extra_headers={"Content-Type": "application/x-www-form-urlencoded"})
    except openai.APIStatusError as e:
        ensure(400 <= e.status_code < 500, f"status {e.status_code}")
        return
    raise Fail("answered 200")


@behaviour("body.not_object", "a JSON body that is not an object (a list, a number, null) is a 400, never a 5xx",
           "chat_completion/test_non_object_body_validation.py")
def non_object_body(ctx: Ctx):
    for body in ("[\"not\", \"an\", \"object\"]", "42", "null", "not json{{{"):
        r = ctx.http.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
        ensure(r.status_code == 400, f"{body!r}: status {r.status_code}")
        ensure("error" in r.json() and "message" in r.json()["error"], f"{body!r}: no OpenAI error object")


@behaviour("error.shape", "a 400 carries OpenAI's error object: message, type, param, code",
           "completion/test_completion_error.py")
def error_shape(ctx: Ctx):
    r = ctx.http.post("/v1/completions", json={"model": ctx.model, "prompt": "hi", "max_tokens": -1})
    body = r.json().get("error", {})
    ensure(r.status_code == 400 and set(body) >= {"message", "type", "param", "code"}, f"{r.status_code} {r.text[:120]}")


@behaviour("prompt.empty", "an empty prompt (\"\" or []) is a 400", "completion/test_empty_prompt_list.py")
def empty_prompt(ctx: Ctx):
    refused(lambda: ctx.client.completions.create(model=ctx.model, prompt="", max_tokens=2))
    refused(lambda: ctx.client.completions.create(model=ctx.model, prompt=[], max_tokens=2))


@behaviour("prompt.out_of_vocab", "a token id outside the vocabulary is a 400 that says so",
           "completion/test_prompt_validation.py::test_out_of_vocab_token_ids")
def out_of_vocab(ctx: Ctx):
    e = refused(lambda: ctx.client.completions.create(model=ctx.model, prompt=[999999], max_tokens=2))
    ensure("vocab" in e.message, f"the message does not name the vocabulary: {e.message}")


@behaviour("cancel.frees", "clients that time out free the server: a fresh request is answered in time afterwards",
           "basic/test_basic.py::test_request_cancellation")
def cancellation(ctx: Ctx):
    if not ctx.sockets:
        raise SkipCheck("needs real connections (client timeouts)")
    impatient = ctx.client.with_options(timeout=0.5)

    def one():
        try:
            impatient.chat.completions.create(model=ctx.model, messages=CHAT, max_tokens=200,
                                              extra_body={"min_tokens": 200})
            return "answered"
        except openai.APITimeoutError:
            return "timeout"
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda _: one(), range(16)))
    ensure(got.count("timeout") == 16, f"expected 16 client timeouts, got {got}")
    start = time.monotonic()
    r = ctx.client.with_options(timeout=20).chat.completions.create(model=ctx.model, messages=CHAT, max_tokens=4)
    ensure(len(r.choices) == 1, "no answer")
    ensure(time.monotonic() - start < 20, "the fresh request waited behind the abandoned ones")


@behaviour("tokenize", "POST /tokenize and /detokenize round-trip a prompt (vLLM's routes)",
           "test_tokenization.py")
def tokenize(ctx: Ctx):
    r = ctx.http.post("/tokenize", json={"model": ctx.model, "prompt": "Hello world"})
    ensure(r.status_code == 200, f"/tokenize {r.status_code}")
    body = r.json()
    ensure(body.get("count") == len(body.get("tokens", [])) > 0 and body.get("max_model_len"), f"{body}")
    back = ctx.http.post("/detokenize", json={"model": ctx.model, "tokens": body["tokens"]})
    ensure(back.status_code == 200 and "Hello world" in back.json().get("prompt", ""), f"{back.text[:120]}")

