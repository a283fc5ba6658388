"""Every HTTP route reads its JSON body here: `json_body(request)`, one rule for all of them.

A body that is not JSON (or not sent as JSON) reads as None and each route says what it expects, as before.
A body nested deeper than MAX_DEPTH, or holding a lone surrogate (half of a UTF-16 pair, which `json` accepts
as a `\\ud800` escape and no tokenizer can encode), raises `BadBody` naming where; `register(app)` answers it
with a 400: `{"error", "field"}` on /api/*, OpenAI's error object on /v1/*. Socket messages have their own
codec with the same limits (app.protocol.WireJSON). This module knows Flask's request, nothing of runs.
"""
import json

from flask import jsonify, request

MAX_DEPTH = 32   # objects and arrays inside one another; a workload needs 4


class BadBody(ValueError):
    """A JSON body refused; `field` says where (`messages[0].content`), None for the body as a whole."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message, self.field = message, field


def json_body(req) -> object | None:
    """The request's JSON body, checked (BadBody), or None when it is not JSON."""
    if not req.is_json:
        return None
    try:
        value = json.loads(req.get_data(cache=True))
    except RecursionError:
        raise BadBody(f"the body nests too deep: at most {MAX_DEPTH} levels of objects and arrays") from None
    except ValueError:   # not JSON, or not UTF-8
        return None
    check(value)
    return value


def check(value: object) -> None:
    """BadBody for the first place (depth-first) where `value` nests past MAX_DEPTH or holds a lone surrogate."""
    stack = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            _text(item, where or "body")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise BadBody(f"the body nests too deep: at most {MAX_DEPTH} levels of objects and arrays", where or None)
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in reversed(list(pairs)):
                if isinstance(key, str):
                    _text(key, f"{where}.{key}" if where else key)
                place = f"{where}[{key}]" if isinstance(item, list) else f"{where}.{key}" if where else str(key)
                stack.append((child, place, depth + 1))


def _text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        where = where.encode("utf-8", "backslashreplace").decode()   # a key may hold the surrogate itself
        raise BadBody(f"{where} is not valid text: it holds a lone surrogate (half of a UTF-16 pair)", where) from None


def register(app) -> None:
    """Answer every BadBody with a 400 in the shape of the API it came to."""
    @app.errorhandler(BadBody)
    def bad_body(e: BadBody):
        if request.path.startswith("/v1/"):
            body = {"error": {"message": e.message, "type": "invalid_request_error", "param": e.field,
                              "code": "invalid_body"}}
        else:
            body = {"error": e.message, "field": e.field}
        return jsonify(body), 400
