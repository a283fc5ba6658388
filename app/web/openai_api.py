"""An OpenAI-compatible endpoint on the engine's live lane: any OpenAI client, curl or benchmark tool can send
its traffic, and the Live view shows it batched.

    POST /v1/chat/completions   POST /v1/completions   GET /v1/models      (stream or not)

Parameters (checked in app.web.openai_params; docs/live-api.md has the table): `max_tokens` /
`max_completion_tokens`, `stop`, `n`, `temperature` (OpenAI's default 1; 0 is greedy, token-exact with
generate()), `top_p`, `seed`, `logprobs` (and chat's `top_logprobs`), `echo`, a completions `prompt` as a
string, token ids or a list of either, `stream`, `stream_options` (`include_usage`, `continuous_usage_stats`),
vLLM's `min_tokens` and `ignore_eos`, and structured output: `response_format` (JSON) and vLLM's
`structured_outputs` (JSON, regex, choice, grammar), through llguidance, and the tool calls `tool_choice` names or makes
"required". Known parameters it cannot honour (tool_choice "auto", penalties, ...) are refused naming the parameter; unknown ones are
ignored, as OpenAI does. Errors use OpenAI's body `{"error": {"message", "type", "param", "code"}}`: 400 for bad input, 404 for another model,
429 when the live lane's queue is full, 503 while the model loads. A stream is server-sent events, one
`data: {chunk}` per event and `data: [DONE]` last; its first chunk (chat's role) leaves with the first token, as
vLLM's does, so a client's TTFT is the server's. At most MAX_CHOICES (32) prompts x n a request: more, or more than
the live lane's queue holds, is a 400 naming `n` (or the prompt); a 429 (with Retry-After) means a full queue only.
A request's id (app.web.requestlog: its X-Request-Id, else L<n>) is its id on the live lane (and its trace span's,
app.web.tracing, where an OTLP endpoint is configured). A client that goes
away mid-stream frees its slot at the next step. This module knows HTTP and the OpenAI format; the live lane is
app.live's (tokenized through its handle, never the engine).
"""
import secrets
import time

from flask import Blueprint, Response, current_app, jsonify, request

from engine.workload.siblings import sibling_seed

from ..asyncmode import client_socket
from ..live.gateway import Unavailable
from . import requestlog, tracing
from .openai_body import ChoiceBody, Choices
from .openai_params import MAX_CHOICES, BadParam, Params, check, prompts
from .bodies import json_body
from .openai_stream import error, sse, whole

bp = Blueprint("openai_api", __name__, url_prefix="/v1")


def _gateway():
    return current_app.extensions["live"]


def served_names() -> list[str]:
    """The names this server answers to: --served-model-name's (the first is the one it reports), else the model's
    own id (its file or folder name)."""
    return list(current_app.config["SERVED_MODEL_NAMES"]) or [current_app.extensions["runs"].model_status()["model"]]


def _model_id() -> str:
    return served_names()[0]


def model_card(name: str) -> dict:
    """A model as /v1/models lists it: `created` is when this server started (it loads the model then), `root`
    the model's own id."""
    return {"id": name, "object": "model", "created": current_app.config["STARTED_AT"], "owned_by": "batch-lanes",
            "root": current_app.extensions["runs"].model_status()["model"], "parent": None}


@bp.get("/models")
def models():
    return jsonify({"object": "list", "data": [model_card(name) for name in served_names()]})


def check_common(body: dict, kind: str) -> Params:
    """The parameters both endpoints share (and completions' echo), checked; the model named must be ours."""
    model = body.get("model")
    if model is not None and model not in served_names() + [current_app.extensions["runs"].model_status()["model"]]:
        raise BadParam("model", f"the model {model!r} does not exist here; GET /v1/models lists {_model_id()!r}", 404,
                       "model_not_found")
    return check(body, kind, current_app.config["LIMITS"], 2048 if kind == "chat" else 16)


def chat_messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadParam("messages", "messages must be a non-empty list of {role, content}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant"):
            raise BadParam(f"messages[{i}].role", "each message needs a role: system, developer, user or assistant")
        content = m.get("content")
        if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                                             for p in content):
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise BadParam(f"messages[{i}].content", "content must be a string (or a list of text parts)")
        out.append({"role": "system" if m["role"] == "developer" else m["role"], "content": content})
    return out


def _tokenize(prompt_chars: int, encode) -> list[int]:
    """`encode(lane)`: the prompt's ids from the live lane's handle, once the prompt's length is checked."""
    limits = current_app.config["LIMITS"]
    if prompt_chars > limits.max_prompt_chars * 4:
        raise BadParam("messages" if request.path.endswith("chat/completions") else "prompt",
                       f"the prompt is {prompt_chars} characters, the limit is {limits.max_prompt_chars * 4}")
    ids = encode(_gateway().lane)
    if ids is None:
        raise Unavailable(503, "model_loading", "the model is still loading; retry when GET /health answers 200")
    return ids


def _check_length(prompt_ids: list[int], params: Params, param: str) -> None:
    limits = current_app.config["LIMITS"]
    if len(prompt_ids) > limits.max_prompt_tokens:
        raise BadParam(param, f"the prompt is {len(prompt_ids)} tokens, the limit is {limits.max_prompt_tokens}")
    row = _gateway().row_len()
    wanted = max(1, params.max_tokens)
    if len(prompt_ids) + wanted > row:
        raise BadParam("max_tokens", f"the prompt ({len(prompt_ids)} tokens) + max_tokens ({wanted}) "
                       f"exceed the live lane's {row} tokens a request")


def _open(prompts_ids: list[tuple[list[int], str]], params: Params, param: str) -> Choices:
    """Every choice on the live lane: prompt p's sample j as choice p * n + j. n > 1 runs each prompt as one group
    of n siblings (engine.workload.siblings: ids `L5·1` ... `L5·n`, seeds seed, seed + 1, ...; they share the prompt's KV
    blocks), each with its own generator, stop and finish."""
    for ids, _ in prompts_ids:
        _check_length(ids, params, param)
    count, most = len(prompts_ids) * params.n, min(MAX_CHOICES, _gateway().max_waiting)
    if count > most:   # a request that can never fit is a 400, not a 429 a client would retry
        field = "n" if params.n > 1 else param
        raise BadParam(field, f"{len(prompts_ids)} prompt(s) x n {params.n} = {count} choices; a request may ask for at "
                       f"most {most} (its choices queue together: at most {MAX_CHOICES} a request, and the live lane's "
                       f"queue holds {_gateway().max_waiting})")
    _gateway().room(count)
    if params.logprobs is not None and _gateway().lane.vocab_size() is None:
        raise BadParam("logprobs", "logprobs need a model's logits; this server runs the simulator")
    if params.grammar is not None and _gateway().lane.vocab_size() is None:
        raise BadParam(params.grammar_param, f"{params.grammar_param} needs a model's logits to mask; this server runs "
                                             "the simulator")
    choices = Choices(params.n)
    echo_logprobs = params.logprobs if params.echo else None
    base = _gateway().request_id(requestlog.given_id())   # the client's X-Request-Id, or L<n>: the lane's ids
    requestlog.set_id(base)
    try:
        for p, (ids, prompt) in enumerate(prompts_ids):
            rid = base if len(prompts_ids) == 1 else f"{base}-{p + 1}"
            group = _gateway().group_id(rid) if params.n > 1 else None
            for j in range(params.n):
                choices.streams.append(_gateway().open(
                    ids, prompt, max(1, params.max_tokens), params.temperature, params.top_p,
                    sibling_seed(params.seed, j + 1), params.stop, params.ignore_eos, min_tokens=params.min_tokens,
                    logprobs=params.logprobs, prompt_logprobs=echo_logprobs, grammar=params.grammar, index=p * params.n + j,
                    events=choices.events, group=group, sample=j + 1 if group else 0,
                    echo_only=params.echo and params.max_tokens == 0, request_id=None if group else rid))
    except Unavailable:
        choices.close()  # a full queue part-way: none of this request's choices stays queued
        raise
    except ValueError as e:  # a lane that cannot serve a grammar (a P/D pair): said as a 400 naming the parameter
        choices.close()
        if params.grammar is None:
            raise
        raise BadParam(params.grammar_param, f"{params.grammar_param}: {e}; a colocated server serves them") from e
    return choices


@bp.post("/chat/completions")
def chat_completions():
    return _serve("chat")


@bp.post("/completions")
def completions():
    return _serve("text")


def _serve(kind: str):
    body = json_body(request)   # BadBody (too deep, a lone surrogate): a 400 (app.web.bodies)
    if not isinstance(body, dict):
        return error(400, "the body must be a JSON object", None, "invalid_json")
    try:
        params = check_common(body, kind)
        lane = _gateway().lane
        if kind == "chat":
            messages = chat_messages(body)
            prompt = messages[-1]["content"] if len(messages) == 1 else "\n".join(m["content"] for m in messages)
            ids = _tokenize(sum(len(m["content"]) for m in messages), lambda lane: lane.encode_chat(messages, prompt))
            asked = [(ids, prompt)]
        else:
            _gateway().ready_lane()
            asked = []
            for p in prompts(body, lane.vocab_size()):
                if isinstance(p, str):
                    asked.append((_tokenize(len(p), lambda lane, p=p: lane.encode_text(p)), p))
                else:
                    asked.append((p, lane.decode(p)))
        streams = _open(asked, params, "messages" if kind == "chat" else "prompt")
    except BadParam as e:
        return error(e.status, e.message, e.param, e.code)
    except Unavailable as e:
        return error(e.status, e.message, None, e.code)
    given = requestlog.given_id()   # as vLLM names a response: its X-Request-Id, else a random id
    head = {"id": ("chatcmpl-" if kind == "chat" else "cmpl-") + (given or secrets.token_hex(12)),
            "created": int(time.time()), "model": _model_id()}
    facts = requestlog.facts()
    facts.update(stream=params.stream, prompt_tokens=sum(len(ids) for ids, _ in asked))
    bodies = [ChoiceBody(p * params.n + j, kind, params, list(ids), prompt, lane.token_texts)
              for p, (ids, prompt) in enumerate(asked) for j in range(params.n)]
    tracing.describe(_model_id(), params, bodies)
    sock = client_socket(request.environ)
    if params.stream:
        response = Response(sse(streams, kind, head, bodies, params.include_usage, params.continuous_usage, sock, facts),
                            mimetype="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        response.call_on_close(streams.close)   # a client gone before the first chunk: the generator never ran
        return response
    return whole(streams, kind, head, bodies, sock, facts)

