"""The server as people start it (`python -m app` in a subprocess, real transport): eventlet mode end to end on
the real default model; same-origin sockets, the message-size cap and logs without prompt text on the simulator."""
import json
import time

import pytest
import requests
import socketio

from tests.kit.server import EventClient, live_server
from tests.kit import ROOT

pytestmark = pytest.mark.slow

MIXED = json.loads((ROOT / "demos" / "mixed.json").read_text())
SECRET = "zebra-violet-7731"  # a prompt word that must never reach the log
SMALL_SWEEP = {"name": "s", "slots": 2, "generate": {"n": 3, "rate": 1, "output_tokens": [2], "prompt_words": [3]}}


def wait_second_queued(client: EventClient, timeout: float = 60) -> str:
    """The run id of the second `run_queued` the client got (its first run was queued first)."""
    deadline = time.monotonic() + timeout
    while len(client.named("run_queued")) < 2:
        assert time.monotonic() < deadline, "the sweep was never queued"
        time.sleep(0.05)
    return client.named("run_queued")[-1]["run_id"]


@pytest.mark.model
def test_eventlet_mode_completes_a_run_and_a_sweep_and_healthz_answers_within_200_ms_while_it_computes():
    with live_server("--async-mode", "eventlet") as url:
        client = EventClient(url)
        client.emit("submit", {"workload": MIXED})
        run_id = client.wait_for("run_queued")["run_id"]
        client.wait_for("tick", run_id)                               # the engine is computing this run
        timings = []
        while not client.named("run_finished", run_id) and len(timings) < 5:
            t0 = time.perf_counter()
            health = requests.get(f"{url}/healthz", timeout=10)
            elapsed = time.perf_counter() - t0
            still_computing = not client.named("run_finished", run_id)  # answered before the run ended
            assert health.json()["ready"] is True
            if still_computing:
                timings.append(elapsed)
            time.sleep(0.1)
        finished = client.wait_for("run_finished", run_id)
        client.emit("sweep", {"workload": SMALL_SWEEP, "rates": [2, 8]})  # a sweep ticks through tpool too
        sweep_id = wait_second_queued(client)
        swept = client.wait_for("sweep_finished", sweep_id)
        client.close()
        log = url.log()
    assert [p["rate"] for p in swept["points"]] == [2.0, 8.0]
    assert all(s["completed"] == 3 for p in swept["points"] for s in p["lanes"].values())
    assert timings, "the run ended before /healthz could be asked while it computed"
    assert max(timings) < 0.2, f"/healthz took {[round(t * 1000) for t in timings]} ms while a run computed"
    assert [t["t"] for t in client.named("tick", run_id)] == list(range(1, 16))
    assert (finished["metrics"]["static"]["steps"], finished["metrics"]["continuous"]["steps"]) == (15, 9)
    assert "eventlet mode" in log and "were not greened" not in log and "Traceback" not in log


@pytest.fixture(scope="module")
def server():
    with live_server("--backend", "sim", "--limit", "max_message_bytes=131072", "--limit", "max_requests=8") as url:
        yield url


def test_command_line_limits_reach_the_api(server):
    limits = requests.get(f"{server}/api/limits").json()
    assert (limits["max_message_bytes"], limits["max_requests"], limits["max_slots"]) == (131072, 8, 16)


def test_sockets_are_same_origin_only(server):
    with pytest.raises(socketio.exceptions.ConnectionError):
        socketio.Client(reconnection=False).connect(server, headers={"Origin": "http://evil.example"})
    own = socketio.Client(reconnection=False)
    own.connect(server, headers={"Origin": server})
    assert own.connected
    own.disconnect()
    assert "access-control-allow-origin" not in {k.lower() for k in requests.get(f"{server}/healthz").headers}


def test_a_message_over_the_cap_never_reaches_a_handler_and_the_server_goes_on(server):
    limits = requests.get(f"{server}/api/limits").json()
    big = EventClient(server)
    big.emit("submit", {"workload": {"requests": [{"id": "A", "prompt": "x" * limits["max_message_bytes"],
                                                   "max_new_tokens": 1}]}})
    deadline = time.monotonic() + 60
    while big.sio.connected and time.monotonic() < deadline:  # the server dropped that session
        time.sleep(0.1)
    assert not big.sio.connected and big.named("run_queued") == [] and big.named("run_error") == []
    # a message under the cap is read and refused with a run_error that names the field and the limit
    client = EventClient(server)
    client.emit("submit", {"workload": {"requests": [{"id": "A", "prompt": "y" * 50_000, "max_new_tokens": 1}]}})
    error = client.wait_for("run_error")
    assert error["field"] == "requests[0].prompt" and "the limit is 4000" in error["message"]
    client.close()
    assert requests.get(f"{server}/healthz").json()["ready"] is True


def test_logs_carry_sizes_and_timings_but_never_prompt_text(server):
    client = EventClient(server)
    workload = {"name": "private", "requests": [{"id": "A", "prompt": f"Tell me about {SECRET}.", "max_new_tokens": 2}]}
    client.emit("submit", {"workload": workload})
    run_id = client.wait_for("run_queued")["run_id"]
    client.wait_for("run_finished", run_id)
    client.emit("submit", {"workload": {"requests": [{"id": "A", "prompt": SECRET * 500, "max_new_tokens": 2}]}})
    client.wait_for("run_error")
    client.close()
    log = server.log()
    assert f"run {run_id} queued: 1 requests, {len(workload['requests'][0]['prompt'])} prompt chars" in log
    assert f"run {run_id} finished: 2 ticks in" in log
    assert "submit refused: field requests[0].prompt" in log
    assert SECRET not in log
