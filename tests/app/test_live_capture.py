"""Live capture by count or by time window, with long quiet gaps compressed on request: the pure capture
(app.live.capture) on request summaries, and GET /api/live/capture on the simulator's live lane."""
import time

import pytest

from app.live.capture import CaptureSpec, capture_spec, capture_workload
from engine import Engine
from engine.limits import WorkloadError
from engine.workload.workload import parse_workload


def summary(i: int, arrival_ms: float, status="finished", stop="length", tokens=3) -> dict:
    return {"id": f"L{i}", "prompt": f"question {i}", "status": status, "stop": stop, "tokens": tokens,
            "arrival_ms": arrival_ms}


# four requests over six minutes: two a second apart, then a quiet 5 minutes, then two 2 s apart
TRAFFIC = [summary(1, 10_000), summary(2, 11_000), summary(3, 311_000), summary(4, 313_000),
           summary(5, 313_500, stop="cancelled"), summary(6, 314_000, status="running")]
NOW_MS = 320_000


def test_a_window_capture_holds_only_the_requests_of_the_last_seconds():
    w = capture_workload(TRAFFIC, NOW_MS, 4, CaptureSpec(last=32, window_s=60))
    assert [q["id"] for q in w["requests"]] == ["L3", "L4"]            # cancelled and running ones never
    assert [q["arrival_ms"] for q in w["requests"]] == [0.0, 2000.0]
    assert "arrived in the last 60 s" in w["description"]
    assert parse_workload(w).timed                                     # it replays as it is


def test_gaps_over_the_threshold_are_compressed_and_the_description_says_so():
    whole = capture_workload(TRAFFIC, NOW_MS, 4, CaptureSpec(last=32))
    assert [q["arrival_ms"] for q in whole["requests"]] == [0.0, 1000.0, 301_000.0, 303_000.0]  # almost all waiting
    cut = capture_workload(TRAFFIC, NOW_MS, 4, CaptureSpec(last=32, compress_over_s=3, compress_to_s=1))
    assert [q["arrival_ms"] for q in cut["requests"]] == [0.0, 1000.0, 2000.0, 4000.0]  # the 2 s gap kept
    assert "gaps over 3 s compressed to 1 s (1 gap cut)" in cut["description"]
    assert [q["max_new_tokens"] for q in cut["requests"]] == [3, 3, 3, 3]


def test_the_last_n_of_a_window_are_kept():
    w = capture_workload(TRAFFIC, NOW_MS, 4, CaptureSpec(last=1, window_s=3600))
    assert [q["id"] for q in w["requests"]] == ["L4"] and w["requests"][0]["arrival_ms"] == 0.0


@pytest.mark.parametrize("args, field", [
    ({"last": "0"}, "last"), ({"last": "x"}, "last"), ({"window_s": "soon"}, "window_s"), ({"window_s": "0"}, "window_s"),
    ({"window_s": "nan"}, "window_s"), ({"compress_over_s": "-1"}, "compress_over_s"),
    ({"compress_to_s": "1"}, "compress_to_s"), ({"compress_over_s": "2", "compress_to_s": "5"}, "compress_to_s")])
def test_a_bad_capture_query_names_its_field(args, field):
    with pytest.raises(WorkloadError) as e:
        capture_spec(args, 32)
    assert e.value.field == field


def test_the_capture_route_takes_a_window_and_compression_and_refuses_a_bad_one_by_name(make_app):
    app = make_app({"LIVE_SLOTS": 2}, engine=Engine(None))
    gateway = app.extensions["live"]
    app.extensions["worker"].ensure_live()
    streams = [gateway.open([0] * 20, f"live {i}", 3, 0.0, 1.0, None, (), True) for i in range(3)]
    deadline = time.monotonic() + 60
    while not all(s.done for s in streams):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    http = app.test_client()
    body = http.get("/api/live/capture?window_s=3600&compress_over_s=3&compress_to_s=1").get_json()
    assert len(body["requests"]) == 3 and body["lanes"] == ["static", "dynamic", "continuous"]
    assert "arrived in the last 3600 s" in body["description"] and "gaps over 3 s compressed to 1 s" in body["description"]
    assert len(http.get("/api/live/capture?last=2").get_json()["requests"]) == 2
    bad = http.get("/api/live/capture?compress_over_s=soon")
    assert bad.status_code == 400 and bad.get_json()["field"] == "compress_over_s"
