"""An OpenAI-compatible endpoint on the engine's live lane: any OpenAI client, curl or benchmark tool can send
its traffic, and the Live view shows it batched.

    POST /v1/chat/completions   POST /v1/completions   GET /v1/models      (stream or not)

Parameters: `max_tokens` / `max_completion_tokens`, `stop`, `n` = 1, `temperature` (OpenAI's default 1; 0 is
greedy, token-exact with generate()), `top_p`, `seed`, `stream`, `stream_options.include_usage`, and
`ignore_eos` as an extension. Other known OpenAI parameters that would change the output (logprobs, tools,
penalties, ...) are refused naming the parameter; unknown ones are ignored, as OpenAI does. Errors use
OpenAI's body `{"error": {"message", "type", "param", "code"}}`: 400 for bad input, 404 for another model,
429 when the live lane's queue is full, 503 while the model loads. A stream is server-sent events, one
`data: {chunk}` per event and `data: [DONE]` last; its first content chunk leaves as soon as the first token
exists. A client that goes away mid-stream frees its slot at the next step. This module knows HTTP and the
OpenAI format; the live lane is app.live's (tokenized through its handle, never the engine).
"""
import secrets
import time

from flask import Blueprint, Response, current_app, jsonify, request

from ..live.gateway import LiveStream, Unavailable
from .bodies import json_body
from .openai_stream import error, sse, whole

bp = Blueprint("openai_api", __name__, url_prefix="/v1")
UNSUPPORTED = {"logprobs": (None, False), "top_logprobs": (None, 0), "tools": (None, []), "tool_choice": (None, "none"),
               "functions": (None, []), "logit_bias": (None, {}), "presence_penalty": (None, 0, 0.0),
               "frequency_penalty": (None, 0, 0.0), "response_format": (None, {"type": "text"}), "echo": (None, False),
               "suffix": (None, ""), "best_of": (None, 1)}


class BadParam(Exception):
    def __init__(self, param: str, message: str, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param, self.message, self.status, self.code = param, message, status, code


def _gateway():
    return current_app.extensions["live"]


def _model_id() -> str:
    return current_app.extensions["runs"].model_status()["model"]


@bp.get("/models")
def models():
    return jsonify({"object": "list", "data": [{"id": _model_id(), "object": "model", "created": 0,
                                                "owned_by": "batch-lanes"}]})


def _number(body: dict, name: str, lo: float, hi: float, default, integer: bool = False):
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) or not lo <= value <= hi:
        kind = "an integer" if integer else "a number"
        raise BadParam(name, f"{name} must be {kind} from {lo} to {hi}, got {value!r}")
    return value


def check_common(body: dict, default_max: int) -> dict:
    """The sampling and length parameters both endpoints share, checked."""
    limits = current_app.config["LIMITS"]
    model = body.get("model")
    if model is not None and model != _model_id():
        raise BadParam("model", f"the model {model!r} does not exist here; GET /v1/models lists {_model_id()!r}", 404,
                       "model_not_found")
    for name, allowed in UNSUPPORTED.items():
        if name in body and body[name] not in allowed:
            raise BadParam(name, f"{name} is not supported by this server")
    if body.get("n", 1) != 1:
        raise BadParam("n", "n must be 1 (one choice per request)")
    length_param = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = _number(body, length_param, 1, limits.max_new_tokens, min(default_max, limits.max_new_tokens), True)
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else [] if stop is None else stop
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and 0 < len(s) <= 100 for s in stop):
        raise BadParam("stop", "stop must be a string or a list of up to 4 non-empty strings of at most 100 characters")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool)):
        raise BadParam("stream_options", 'stream_options must be an object like {"include_usage": true}')
    for flag in ("stream", "ignore_eos"):
        if not isinstance(body.get(flag, False), bool):
            raise BadParam(flag, f"{flag} must be true or false")
    return {"max_tokens": max_tokens, "temperature": _number(body, "temperature", 0, 2, 1.0),
            "top_p": _number(body, "top_p", 1e-6, 1, 1.0), "seed": _number(body, "seed", -2 ** 63, 2 ** 64 - 1, None, True),
            "stop": tuple(stop), "ignore_eos": body.get("ignore_eos", False), "stream": body.get("stream", False),
            "include_usage": bool((options or {}).get("include_usage"))}


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
        raise Unavailable(503, "model_loading", "the model is still loading; retry when GET /healthz says ready")
    return ids


def _open(prompt_ids: list[int], prompt: str, params: dict, param: str) -> LiveStream:
    limits = current_app.config["LIMITS"]
    if len(prompt_ids) > limits.max_prompt_tokens:
        raise BadParam(param, f"the prompt is {len(prompt_ids)} tokens, the limit is {limits.max_prompt_tokens}")
    row = _gateway().row_len()
    if len(prompt_ids) + params["max_tokens"] > row:
        raise BadParam("max_tokens", f"the prompt ({len(prompt_ids)} tokens) + max_tokens ({params['max_tokens']}) "
                       f"exceed the live lane's {row} tokens a request")
    return _gateway().open(prompt_ids, prompt, params["max_tokens"], params["temperature"], params["top_p"],
                           params["seed"], params["stop"], params["ignore_eos"])


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
        params = check_common(body, 2048 if kind == "chat" else 16)
        if kind == "chat":
            messages = chat_messages(body)
            prompt = messages[-1]["content"] if len(messages) == 1 else "\n".join(m["content"] for m in messages)
            ids = _tokenize(sum(len(m["content"]) for m in messages), lambda lane: lane.encode_chat(messages, prompt))
            stream = _open(ids, prompt, params, "messages")
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if not isinstance(prompt, str) or not prompt:
                raise BadParam("prompt", "prompt must be a non-empty string")
            ids = _tokenize(len(prompt), lambda lane: lane.encode_text(prompt))
            stream = _open(ids, prompt, params, "prompt")
    except BadParam as e:
        return error(e.status, e.message, e.param, e.code)
    except Unavailable as e:
        return error(e.status, e.message, None, e.code)
    head = {"id": ("chatcmpl-" if kind == "chat" else "cmpl-") + secrets.token_hex(12), "created": int(time.time()),
            "model": _model_id()}
    if params["stream"]:
        return Response(sse(stream, kind, head, params["include_usage"], request.environ.get("werkzeug.socket")),
                        mimetype="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return whole(stream, kind, head)


unavailable_bp = Blueprint("openai_api_elsewhere", __name__, url_prefix="/v1")


@unavailable_bp.route("/<path:rest>", methods=["GET", "POST"])
def elsewhere(rest: str):
    """A web process over Redis has no engine: the OpenAI endpoint is a single process's (for now)."""
    return error(501, "the OpenAI endpoint is served by a single-process server (python -m app without "
                      "--message-queue); this is a web process of a scale-out deployment", None, "not_served_here")
