"""Who may call the serving API, as vLLM spells it: `--api-key` (or $VLLM_API_KEY) guards `/v1/*`, `/tokenize` and
`/detokenize` — a request without `Authorization: Bearer KEY` is a 401 in OpenAI's error object — and
`--allowed-origins` lets pages of those origins call them from a browser (CORS, the preflight answered here).

The page's own routes (`/`, `/live`, `/api/*`, `/metrics`, `/health`, the sockets) are neither guarded nor opened to
other origins: the sockets stay same-origin (app.web.factory) and a class's secrets are the class's. This module
knows the config keys API_KEY and ALLOWED_ORIGINS and HTTP headers, nothing of the engine.
"""
import secrets

from flask import Flask, Response, current_app, request

from .openai_stream import error

GUARDED = ("/v1/", "/tokenize", "/detokenize")
PREFLIGHT_MAX_AGE_S = 600


def guarded(path: str) -> bool:
    return path.startswith(GUARDED[0]) or path in GUARDED[1:]


def register(app: Flask) -> None:
    app.before_request(_check)
    app.after_request(_cors)


def _allowed_origin() -> str | None:
    """The `Access-Control-Allow-Origin` this request's Origin gets, or None."""
    origin, allowed = request.headers.get("Origin"), current_app.config["ALLOWED_ORIGINS"]
    if not origin or not allowed:
        return None
    if "*" in allowed:
        return "*"
    return origin if origin.rstrip("/") in allowed else None


def _check():
    if not guarded(request.path):
        return None
    if request.method == "OPTIONS" and request.headers.get("Access-Control-Request-Method"):   # a CORS preflight
        response = Response(status=204)
        if _allowed_origin():
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = request.headers.get(
                "Access-Control-Request-Headers", "Authorization, Content-Type")
            response.headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE_S)
        return response
    key = current_app.config["API_KEY"]
    if key:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip().encode(), key.encode()):
            body, status, headers = error(401, "Incorrect or missing API key: send `Authorization: Bearer <key>`",
                                          None, "invalid_api_key")
            return body, status, {**headers, "WWW-Authenticate": "Bearer"}
    return None


def _cors(response: Response) -> Response:
    if guarded(request.path) and (origin := _allowed_origin()):
        response.headers["Access-Control-Allow-Origin"] = origin
        if origin != "*":
            response.headers.add("Vary", "Origin")
    return response
