"""Malformed input gets a clear answer (issue 22): HTTP bodies nested 10,000 deep or holding a lone surrogate
are a 400 naming where, on /api/* and /v1/*; malformed Socket.IO frames are answered with a run_error, logged
at one line each and counted, never a traceback. The simulator: no model is needed to refuse input."""
import logging

import pytest

from app.web.bodies import MAX_DEPTH, BadBody, check
from app.web.frames import CheckedPacket
from engine import Engine

DEEP = "[" * 10_000 + "]" * 10_000


@pytest.fixture
def app(make_app):
    return make_app({"LIVE_SLOTS": 1}, engine=Engine(None))


def post(client, path: str, text: str):
    return client.post(path, data=text, content_type="application/json")


@pytest.mark.parametrize("path", ["/api/tokens", "/api/generate", "/v1/chat/completions", "/v1/completions"])
def test_a_body_nested_ten_thousand_deep_is_a_400_not_a_500(app, path):
    for text in (DEEP, '{"a":' * 50 + "1" + "}" * 50):
        r = post(app.test_client(), path, text)
        assert r.status_code == 400, r.data
        error = r.get_json()["error"]
        assert "nests too deep" in (error["message"] if path.startswith("/v1") else error)


def test_a_lone_surrogate_is_refused_naming_its_field(app):
    client = app.test_client()
    r = post(client, "/api/tokens", '{"prompts": ["fine", "bad \\ud800 text"]}')
    assert r.status_code == 400 and r.get_json()["field"] == "prompts[1]" and "lone surrogate" in r.get_json()["error"]
    r = post(client, "/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi \\udfff"}]}')
    error = r.get_json()["error"]
    assert r.status_code == 400 and error["param"] == "messages[0].content" and error["type"] == "invalid_request_error"
    r = post(client, "/api/generate", '{"generate": {"\\ud800": 1}}')
    assert r.status_code == 400 and r.get_json()["field"].startswith("generate.")


def test_the_body_check_allows_what_a_workload_needs_and_names_the_deepest_place():
    check({"requests": [{"id": "A", "prompt": "é🙂", "arrival": 0}], "slots": 2})
    deep: list = []
    inner = deep
    for _ in range(MAX_DEPTH):
        inner.append([])
        inner = inner[0]
    with pytest.raises(BadBody) as e:
        check({"x": deep})
    assert e.value.field.startswith("x[0][0]")


FRAMES = ["2", "", "2{}", "2[]", "2[1]", '2""', "9", "4", "5-[]", "2" + "9" * 120 + '["submit"]', "x", "3", '31["x"]',
          '2/evil,["submit"]', '2["no_such_event", 1]', '2["submit", {"workload": ' + "[" * 5000 + "]" * 5000 + "}]"]


def test_malformed_socket_frames_are_answered_logged_at_one_line_and_counted_never_a_traceback(app, connect, caplog):
    probe = connect(app)
    server = probe.client.socketio.server
    before, answered = CheckedPacket.ignored, len(probe.named("run_error"))
    with caplog.at_level(logging.WARNING):
        for frame in FRAMES:
            server._handle_eio_message(probe.client.eio_sid, frame)
    assert CheckedPacket.ignored - before == len(FRAMES)
    ignored = [r for r in caplog.records if r.name == "batch_lanes.frames"]
    assert len(ignored) == len(FRAMES) and all("\n" not in r.getMessage() for r in ignored)
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
    assert len(probe.named("run_error")) - answered == len(FRAMES)
    assert "could not be read: an event packet without an event name" in probe.named("run_error")[answered]["message"]
    probe.emit("watch", {"run_id": "nope-nope-no"})            # and the connection still works
    assert probe.named("run_error")[-1]["code"] == "not_found"
