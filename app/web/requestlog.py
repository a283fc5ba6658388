"""Requests you can follow: every HTTP request gets an id (the client's `X-Request-Id` where it sends a usable one,
else one made here; the OpenAI handler makes it the live lane's request id, so /api/live and the step records name
it too), echoed in the response's `X-Request-Id`, and one access log line when its response ends (a stream: when
its last byte left), under the logger `batch_lanes.access`:

    request L12 POST /v1/chat/completions 200 prompt_tokens=31 output_tokens=64 ttft_ms=182 latency_ms=2140 stream

(JSON lines under `--log-json`: app.logs). Engine.io's own polls and the static files are not logged (a page's
socket polls every 25 s). A handler adds what it knows (tokens, TTFT) to `facts()`, a dict it may fill until the
response closes. This module knows Flask and logging, nothing of the engine.
"""
import logging
import re
import time
import uuid

from flask import Flask, Response, g, request

log = logging.getLogger("batch_lanes.access")
ID = re.compile(r"[A-Za-z0-9._:~-]{1,64}")   # a client's id is taken as it is when it is this (else one is made)
QUIET = ("/socket.io/", "/static/")


def register(app: Flask) -> None:
    app.before_request(_begin)
    app.after_request(_end)


def given_id() -> str | None:
    """The client's `X-Request-Id`, if it is usable as a request id here."""
    wanted = request.headers.get("X-Request-Id", "")
    return wanted if ID.fullmatch(wanted) else None


def set_id(request_id: str) -> None:
    """The id this request goes by (the OpenAI handler: its live lane id)."""
    g.request_id = request_id


def facts() -> dict:
    """What the access line says beyond the route and status: a handler fills it (until the response closes)."""
    return request.environ.setdefault("batch_lanes.facts", {})


def _begin() -> None:
    g.request_started = time.monotonic()
    g.request_id = given_id() or uuid.uuid4().hex


def _end(response: Response) -> Response:
    if not hasattr(g, "request_id"):   # a request that failed before _begin (a bad URL)
        return response
    response.headers["X-Request-Id"] = g.request_id
    if request.path.startswith(QUIET):
        return response
    line = {"request_id": g.request_id, "method": request.method, "route": request.path,
            "status": response.status_code}
    started, found = g.request_started, facts()
    response.call_on_close(lambda: _write(line, found, started))
    return response


def _write(line: dict, found: dict, started: float) -> None:
    line = {**line, **{k: v for k, v in found.items() if v is not None},
            "latency_ms": round((time.monotonic() - started) * 1000, 1)}
    if "first_token_at" in line:   # time.monotonic() when the first token left (or was ready, not streamed)
        line["ttft_ms"] = round((line.pop("first_token_at") - started) * 1000, 1)
    words = [f"{k}={v}" for k, v in line.items() if k not in ("request_id", "method", "route", "status", "stream")]
    log.info("request %s %s %s %s %s%s", line["request_id"], line["method"], line["route"], line["status"],
             " ".join(words), " stream" if line.get("stream") else "", extra={"fields": line})
