"""The OpenAI endpoint's responses from a request's live streams: one whole JSON body, or server-sent events.

A stream is `data: {chunk}` events separated by blank lines: a role chunk per choice (chat), the echoed prompt
(completions with `echo`), each sent just before that choice's first token, a chunk per piece of text as the live
lane writes it (with its tokens' logprobs when asked), each choice's finish reason on its last text's chunk (as vLLM
sends it; on a chunk of its own where no text came with the end: a stop string's cut, an EOS), the usage chunk if asked (`continuous_usage_stats`: usage on every chunk too),
`data: [DONE]`; every chunk names its choice's `index`. Streamed or whole, it looks whether its client has closed
the connection (the socket app.asyncmode.client_socket finds, under werkzeug or eventlet) while it waits, so a
client that goes away frees its slots (or its places in the queue) at the next step; a stream the server stops
iterating (its write failed) is closed by the response's close hook too. This module knows the OpenAI chunk format
(through app.web.openai_body) and the live streams' events, nothing of validation.
"""
import json
import select
import socket
import time

from flask import Response, jsonify

from ..live.stream import DoneEvent, ErrorEvent, PromptEvent, TextEvent
from .openai_body import ChoiceBody, Choices, usage

CLIENT_GONE = 499
READ_TIMEOUT_S = 0.05   # how often a waiting stream looks whether its client is still there
RETRY_AFTER_S = 1       # a 429's Retry-After: a full queue drains by a request or more a second on the live lane


def error(status: int, message: str, param: str | None = None, code: str | None = None):
    kind = {429: "rate_limit_error"}.get(status, "invalid_request_error" if 400 <= status < 500 else "server_error")
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 429 else {}
    return jsonify({"error": {"message": message, "type": kind, "param": param, "code": code}}), status, headers


def whole(streams: Choices, kind: str, head: dict, bodies: list[ChoiceBody], sock=None, facts: dict | None = None):
    """Every choice's whole text, then one body; an engine error is a 500 naming it. If the client left first, its
    requests are dropped and the (unread) answer is an empty 499, nginx's "client closed request". `facts`
    (app.web.requestlog) gets the first token's time, the tokens written and an engine error."""
    facts = {} if facts is None else facts
    left, looked = len(bodies), time.monotonic()
    try:
        while left:
            got = streams.read(timeout=READ_TIMEOUT_S)
            if time.monotonic() - looked >= READ_TIMEOUT_S:    # tokens flowing or not, look every 50 ms
                looked = time.monotonic()
                if client_gone(sock):
                    return Response(status=CLIENT_GONE)
            if got is None:
                continue
            index, event = got
            if isinstance(event, ErrorEvent):
                facts["error"] = "engine_error"
                return error(500, event.message, None, "engine_error")
            if isinstance(event, (TextEvent, DoneEvent)):
                facts.setdefault("first_token_at", time.monotonic())
            bodies[index].add(event)
            left -= isinstance(event, DoneEvent)
    finally:
        streams.close()
        facts["output_tokens"] = sum(b.tokens for b in bodies)
    return jsonify({**head, "object": "chat.completion" if kind == "chat" else "text_completion",
                    "choices": [b.whole() for b in bodies], "usage": usage(bodies, streams.n)})


def sse(streams: Choices, kind: str, head: dict, bodies: list[ChoiceBody], include_usage: bool,
        continuous_usage: bool, sock, facts: dict | None = None):
    """The server-sent events of a request's choices, `[DONE]` last. Between events it looks whether the client
    closed its connection. `facts` (app.web.requestlog) gets the first chunk's time, the tokens written and an engine
    error."""
    facts = {} if facts is None else facts
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    extra = {"usage": None} if include_usage else {}

    def chunk(body: ChoiceBody, delta: str | None, finish: str | None = None, role: bool = False,
              logprobs: dict | None = None) -> bytes:
        choice = {"index": body.index, "finish_reason": finish, "logprobs": logprobs}
        if kind == "chat":
            choice["delta"] = {"role": "assistant", "content": ""} if role else body.chat_delta(delta or "", finish is not None)
        else:
            choice["text"] = delta or ""
        more = {"usage": usage(bodies, streams.n)} if continuous_usage else extra
        return data({**head, "object": obj, "choices": [choice], **more})
    opened: set[int] = set()

    def first(body: ChoiceBody):
        """A choice's opening chunk (chat: its role; completions: the echoed prompt), with its first token, as vLLM
        sends it: a client times its first token from the first chunk."""
        if body.index in opened:
            return
        opened.add(body.index)
        facts.setdefault("first_token_at", time.monotonic())
        if kind == "chat":
            yield chunk(body, None, role=True)
        elif body.params.echo and body.params.logprobs is None:
            yield chunk(body, body.prompt_text)
    try:
        yield b""   # an empty write: gunicorn and werkzeug send the status line and headers on acceptance, as vLLM does
        left, ahead = len(bodies), None   # ahead: an event read to see whether it ends the text just read
        while left:
            got, ahead = ahead or streams.read(READ_TIMEOUT_S), None
            if got is None:
                if client_gone(sock):
                    return
                continue
            index, event = got
            body = bodies[index]
            if not isinstance(event, ErrorEvent):
                yield from first(body)   # before the event counts: the role chunk's usage has no token yet
            body.add(event)
            if isinstance(event, PromptEvent) and body.params.echo:  # the echoed prompt with its logprobs
                yield chunk(body, body.prompt_text, logprobs=body.logprobs([], prompt=True))
            elif isinstance(event, TextEvent) and event.text and not body.echo_only:
                ahead = streams.read(0)   # the lane puts a choice's last text and its end together: one chunk, as vLLM
                if ahead is not None and ahead[0] == index and isinstance(ahead[1], DoneEvent):
                    (_, done), ahead, left = ahead, None, left - 1
                    body.add(done)
                    yield chunk(body, event.text, body.finish, logprobs=body.logprobs(event.entries + done.entries))
                elif not body.params.tools_required:   # "required"'s calls go whole with its finish
                    yield chunk(body, event.text, logprobs=body.logprobs(event.entries))
            elif isinstance(event, ErrorEvent):  # the status line has gone: the error travels as an event, as vLLM does
                facts["error"] = "engine_error"   # (the access line and the trace span say so)
                yield data({"error": {"message": event.message, "type": "server_error", "param": None,
                                      "code": "engine_error"}})
                yield b"data: [DONE]\n\n"
                return
            elif isinstance(event, DoneEvent):
                left -= 1
                tail = [] if body.echo_only else event.entries  # tokens written after the last text (held back, cut)
                yield chunk(body, None, body.finish, logprobs=body.logprobs(tail) if tail else None)
        if include_usage:
            yield data({**head, "object": obj, "choices": [], "usage": usage(bodies, streams.n)})
        yield b"data: [DONE]\n\n"
    finally:
        streams.close()  # the client went away (or got everything): requests still running leave their slots
        facts["output_tokens"] = sum(b.tokens for b in bodies)


def data(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def client_gone(sock) -> bool:
    """Whether the peer of `sock` (werkzeug's connection, where the server gives it) has closed it."""
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (OSError, ValueError):
        return True
