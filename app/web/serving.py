"""The routes serving clients probe besides /v1's completions, in vLLM's shapes, and OpenAI's error object for
every error under /v1.

    GET /health        200 (empty) once the model is ready; 503 while it loads, when it failed, or the engine's loop died
    GET /version       {"version"}
    POST /tokenize     {prompt | messages, add_special_tokens?} -> {count, max_model_len, tokens, token_strs}
    POST /detokenize   {tokens} -> {prompt}
    GET /v1/models/ID  the model, or 404 model_not_found

guidellm and aiperf probe /health before a benchmark; lm-eval-harness and others count tokens with /tokenize.
Errors under /v1 (an unknown path, a wrong method, a body over the limit, an internal error) answer
{"error": {"message", "type", "param", "code"}} (`v1_error`, which routes.py's 404 and 405 handlers ask first).
Tokenizing goes through the live lane's handle (app.live.handle), never the engine. This module knows HTTP
and those shapes, nothing of the lane's state.
"""
from importlib.metadata import PackageNotFoundError, version

from flask import Blueprint, Response, current_app, jsonify, request
from werkzeug.exceptions import HTTPException

from .bodies import json_body
from .openai_api import BadParam, chat_messages  # the chat's checks, one definition
from .openai_stream import error

bp = Blueprint("serving", __name__)
MAX_IDS = 100_000   # ids one /detokenize may send


def _version() -> str:
    try:
        return version("batch-lanes")
    except PackageNotFoundError:
        return "unknown"


def _lane():
    """The live lane's handle: this process's engine worker's, or on a web process of a scale-out deployment the
    engine workers' over Redis (app.live.remote); None only for an app built without one."""
    live = current_app.extensions.get("live")
    return live.lane if live is not None else None


@bp.get("/health")
def health():
    body, status = current_app.extensions["runs"].health()
    worker = current_app.extensions.get("worker")
    if worker is not None and not worker.alive():
        return error(503, "the engine's loop has stopped", None, "engine_dead")
    if status != 200:
        return error(503, body.get("error") or "the engine is unreachable", None, "engine_error")
    if not body["ready"]:
        return error(503, f"the model is loading ({body.get('progress')})", None, "model_loading")
    return Response(status=200)


@bp.get("/version")
def version_route():
    return jsonify({"version": _version()})


@bp.get("/v1/models/<path:model_id>")
def model(model_id: str):
    from .openai_api import model_card, served_names
    if model_id not in served_names():
        return error(404, f"The model `{model_id}` does not exist.", "model", "model_not_found")
    return jsonify(model_card(model_id))


def _body() -> dict:
    body = json_body(request)   # too deep or a lone surrogate: a 400 (app.web.bodies)
    return body if isinstance(body, dict) else None


def _not_served():
    return error(501, "this process has no live lane to tokenize with", None, "not_served_here")


@bp.post("/tokenize")
def tokenize():
    lane, body = _lane(), _body()
    if lane is None:
        return _not_served()
    if body is None:
        return error(400, "the body must be a JSON object", None, "invalid_json")
    limit = current_app.config["LIMITS"].max_prompt_chars * 4
    special = body.get("add_special_tokens", "messages" not in body)
    if not isinstance(special, bool):
        return error(400, "add_special_tokens must be true or false", "add_special_tokens")
    if "messages" in body:
        try:
            messages = chat_messages(body)
        except BadParam as e:
            return error(e.status, e.message, e.param, e.code)
        if sum(len(m["content"]) for m in messages) > limit:
            return error(400, f"the messages are over {limit} characters", "messages")
        ids = lane.encode_chat(messages, "\n".join(m["content"] for m in messages))
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or len(prompt) > limit:
            return error(400, f"prompt must be a string of at most {limit} characters (or send messages)", "prompt")
        ids = lane.tokenize(prompt, special)
    if ids is None or not lane.ready():
        return error(503, "the model is still loading; retry when GET /health answers 200", None, "model_loading")
    return jsonify({"count": len(ids), "max_model_len": lane.row_len(), "tokens": ids, "token_strs": None})


@bp.post("/detokenize")
def detokenize():
    lane, body = _lane(), _body()
    if lane is None:
        return _not_served()
    ids = body.get("tokens") if body is not None else None
    if not isinstance(ids, list) or len(ids) > MAX_IDS or not all(isinstance(i, int) and not isinstance(i, bool)
                                                                   for i in ids):
        return error(400, f"tokens must be a list of at most {MAX_IDS} token ids", "tokens")
    try:
        text = lane.detokenize(ids)
    except ValueError as e:
        return error(400, str(e), "tokens")
    if text is None:
        return error(503, "the model is still loading; retry when GET /health answers 200", None, "model_loading")
    return jsonify({"prompt": text})


def v1_error(e: HTTPException):
    """OpenAI's error object for an HTTP error under /v1 (None elsewhere: the page's own handlers answer)."""
    if not request.path.startswith("/v1/") and request.path != "/v1":
        return None
    messages = {404: f"{request.method} {request.path} does not exist", 405: f"{request.method} is not allowed on "
                f"{request.path}", 413: "the request body is over the server's limit"}
    code = e.code or 500
    return error(code, messages.get(code, e.description or e.name), None, e.name.lower().replace(" ", "_"))


@bp.app_errorhandler(HTTPException)
def http_error(e: HTTPException):
    """Errors no handler by code answers (413, 500, ...): OpenAI's object under /v1, werkzeug's page elsewhere."""
    return v1_error(e) or e
