"""The client-visible behaviours that vLLM's own OpenAI-server tests check (vllm-project/vllm/tests/entrypoints/openai/,
read 2026-12-06), restated for a text-only generation server, each a small check with the official
`openai` client (plain HTTP only where the client cannot say it). `BEHAVIOURS` lists them in order (scripts/conformance_serving.py,
conformance_completions.py and conformance_chat.py add theirs when imported); each is
`(id, what a client expects, the vLLM test it comes from, check)`, and a check raises `Fail` (or AssertionError)
with the reason, or returns. Small max_tokens everywhere: the whole list takes a few minutes on a 135M model on CPU.

Left out (docs/live-api.md says why): multimodal input (images, audio, video, embeds), LoRA adapters, embeddings,
scores, transcription, reasoning parsers and `chat_template_kwargs`, beam search, the Harmony format, prompt embeds,
KV-transfer and hidden-state extraction, `/load`, `/invocations` (SageMaker), server-side CLI flags, and the tests
that exercise vLLM's internals (its request classes, sampling params, engine errors) rather than a client's view.
This module knows the OpenAI API as a client sees it, nothing of this server's code.
"""
from dataclasses import dataclass

import httpx2 as httpx
import openai


class Fail(Exception):
    """A behaviour the server did not show; the message says what it did instead."""


class SkipCheck(Exception):
    """A behaviour that cannot be checked where the harness runs (it counts neither way)."""


@dataclass
class Ctx:
    client: openai.OpenAI      # the official client, max_retries 0
    http: httpx.Client         # plain HTTP on the server's root (for what the client cannot express)
    model: str                 # the first id /v1/models lists
    sockets: bool = True       # False in-process (no real connections: client timeouts cannot happen)


BEHAVIOURS: list[tuple[str, str, str, object]] = []


def behaviour(bid: str, text: str, source: str):
    def add(fn):
        BEHAVIOURS.append((bid, text, source, fn))
        return fn
    return add


def ensure(ok, why: str) -> None:
    if not ok:
        raise Fail(why)


STORY = "Once upon a time, in a small village by the sea, there lived"   # a raw prompt that runs on
CHAT = [{"role": "system", "content": "you are a helpful assistant"},
        {"role": "user", "content": "Tell me a long story about a dragon who lives in a castle."}]
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}}},
           {"type": "function", "function": {"name": "get_time", "parameters": {
               "type": "object", "properties": {}, "additionalProperties": False}}}]


def person_ok(value) -> bool:
    """`value` keeps to PERSON (the harness carries no jsonschema package)."""
    return isinstance(value, dict) and set(value) == {"name", "age"} and isinstance(value["name"], str) and \
        len(value["name"]) <= 12 and isinstance(value["age"], int) and not isinstance(value["age"], bool) and \
        0 <= value["age"] <= 120


def weather_ok(value) -> bool:
    return isinstance(value, dict) and set(value) == {"city", "unit"} and isinstance(value["city"], str) and \
        value["unit"] in ("celsius", "fahrenheit")


def refused(call, status: int = 400) -> openai.APIStatusError:
    """The error `call()` must raise (status `status`); Fail if it answers."""
    try:
        got = call()
        if isinstance(got, openai.Stream):
            for _ in got:
                pass
    except openai.APIStatusError as e:
        ensure(e.status_code == status, f"expected {status}, got {e.status_code}: {e.message}")
        return e
    raise Fail(f"expected a {status}, got an answer")


def chat(ctx: Ctx, messages=None, **kw):
    return ctx.client.chat.completions.create(model=ctx.model, messages=messages or CHAT, **kw)


def comp(ctx: Ctx, prompt=STORY, **kw):
    return ctx.client.completions.create(model=ctx.model, prompt=prompt, **kw)


def chunks(stream) -> list:
    return list(stream)


def still_serves(ctx: Ctx) -> None:
    r = comp(ctx, max_tokens=2, temperature=0)
    ensure(len(r.choices) == 1, "the server does not answer after the refusal")

