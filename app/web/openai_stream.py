"""The OpenAI endpoint's responses from a live stream: one whole JSON body, or server-sent events.

A stream is `data: {chunk}` events separated by blank lines: a role chunk (chat), a chunk per piece of text as
the live lane writes it, the finish chunk, the usage chunk if asked, `data: [DONE]`. Streamed or whole, it looks
whether its client has closed the connection (the socket app.asyncmode.client_socket finds, under werkzeug or
eventlet) while it waits, so a client that goes away frees its slot (or its place in the queue) at the next
step; a stream the server stops iterating (its write failed) is closed by the response's close hook too. This module knows the OpenAI chunk format and
`app.live.gateway.LiveStream`, nothing of validation.
"""
import json
import select
import socket
import time

from flask import Response, jsonify

from ..live.gateway import LiveStream

CLIENT_GONE = 499
READ_TIMEOUT_S = 0.05   # how often a waiting response looks whether its client is still there


def error(status: int, message: str, param: str | None = None, code: str | None = None):
    kind = {429: "rate_limit_error"}.get(status, "invalid_request_error" if 400 <= status < 500 else "server_error")
    return jsonify({"error": {"message": message, "type": kind, "param": param, "code": code}}), status


def whole(stream: LiveStream, kind: str, head: dict, sock=None):
    """One JSON body once the request ends; if its client left first, the request is dropped and the (unread)
    answer is an empty 499, nginx's "client closed request"."""
    text, looked = [], time.monotonic()
    try:
        while (event := stream.read(timeout=READ_TIMEOUT_S)) is None or event[0] == "text":
            if event is not None:
                text.append(event[1])
            if time.monotonic() - looked >= READ_TIMEOUT_S:    # tokens flowing or not, look every 50 ms
                looked = time.monotonic()
                if client_gone(sock):
                    return Response(status=CLIENT_GONE)
    finally:
        stream.close()
    if event[0] == "error":
        return error(500, event[1], None, "engine_error")
    _, finish, usage = event
    choice = {"index": 0, "finish_reason": finish, "logprobs": None}
    choice.update({"message": {"role": "assistant", "content": "".join(text)}} if kind == "chat" else {"text": "".join(text)})
    return jsonify({**head, "object": "chat.completion" if kind == "chat" else "text_completion", "choices": [choice],
                    "usage": usage})


def sse(stream: LiveStream, kind: str, head: dict, include_usage: bool, sock):
    """The server-sent events of a stream: a role chunk, a chunk per piece of text, the finish chunk, the usage
    chunk if asked, `[DONE]`. Between events it looks whether the client closed its connection."""
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: str | None, finish: str | None = None, role: bool = False) -> bytes:
        choice = {"index": 0, "finish_reason": finish, "logprobs": None}
        if kind == "chat":
            choice["delta"] = {"role": "assistant", "content": ""} if role else {} if delta is None else {"content": delta}
        else:
            choice["text"] = delta or ""
        return b"data: " + json.dumps({**head, "object": obj, "choices": [choice], **extra}).encode() + b"\n\n"
    try:
        if kind == "chat":
            yield chunk(None, role=True)
        while True:
            event = stream.read(READ_TIMEOUT_S)
            if event is None:
                if client_gone(sock):
                    return
                continue
            if event[0] == "text":
                yield chunk(event[1])
                continue
            if event[0] == "error":  # the status line has gone: the error travels as an event, as vLLM sends it
                yield b"data: " + json.dumps({"error": {"message": event[1], "type": "server_error", "param": None,
                                                        "code": "engine_error"}}).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"
                return
            _, finish, usage = event
            yield chunk(None, finish)
            if include_usage:
                yield b"data: " + json.dumps({**head, "object": obj, "choices": [], "usage": usage}).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
            return
    finally:
        stream.close()  # the client went away (or got everything): a request still running leaves its slot


def client_gone(sock) -> bool:
    """Whether the peer of `sock` (werkzeug's connection, where the server gives it) has closed it."""
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (OSError, ValueError):
        return True

