"""The socket protocol on the real default model: submit -> run_queued -> run_started -> ticks -> run_finished,
spectators joining mid-run, finished runs replaying, and bad input answered with run_error."""
import json
import threading

import pytest

from engine import Engine
from engine.report.metrics import run_metrics
from engine.workload.workload import parse_workload
from tests.kit import ROOT

pytestmark = pytest.mark.model

DEMOS = ROOT / "demos"


def preset(name: str) -> dict:
    return json.loads((DEMOS / f"{name}.json").read_text())


@pytest.fixture
def app(make_app, smol):
    return make_app(engine=Engine(smol))


class PausingEngine(Engine):
    """The real engine; a run waits before its second tick until the test sets `resume`."""

    def __init__(self, lm):
        super().__init__(lm)
        self.paused, self.resume = threading.Event(), threading.Event()

    def start(self, workload, lanes=None):
        run = super().start(workload, lanes)
        real_tick = run.tick

        def tick():
            if run.t == 1:
                self.paused.set()
                assert self.resume.wait(300), "the test never resumed the run"
            return real_tick()
        run.tick = tick
        return run


def run_events(probe, run_id: str) -> list[tuple[str, dict]]:
    return [(n, p) for n, p in probe.poll() if isinstance(p, dict) and p.get("run_id") == run_id]


def test_submit_streams_consecutive_ticks_and_the_cli_metrics_of_the_mixed_preset(app, connect, smol):
    probe = connect(app)
    assert probe.named("model_status")[0]["ready"] is True
    probe.emit("submit", {"workload": preset("mixed"), "lanes": ["static", "continuous"]})
    queued = probe.wait_for("run_queued")
    run_id = queued["run_id"]
    assert queued["position"] == 1
    finished = probe.wait_for("run_finished", run_id)

    events = run_events(probe, run_id)
    names = [n for n, _ in events]
    assert names[:2] == ["run_queued", "run_started"] and names[-1] == "run_finished"
    started = events[1][1]
    assert started["lanes"] == ["static", "continuous"] and started["model"] == smol.name
    assert started["workload"]["name"] == "mixed" and len(started["workload"]["requests"]) == 8
    assert {p: t["admits"] for p, t in started["policies"].items()} == {"static": "group", "dynamic": "group",
                                                                       "continuous": "slot"}
    ticks = [p for n, p in events if n == "tick"]
    assert [t["t"] for t in ticks] == list(range(1, 16))           # 15 shared steps, none lost or reordered
    assert all(t["lanes"]["static"]["step"] == t["t"] for t in ticks)
    assert [t["lanes"]["continuous"] is None for t in ticks] == [False] * 9 + [True] * 6

    m = finished["metrics"]
    assert (m["static"]["steps"], m["continuous"]["steps"]) == (15, 9)
    assert (round(m["static"]["slot_use"] * 100), round(m["continuous"]["slot_use"] * 100)) == (48, 81)
    assert m["continuous"]["mean_ttft_steps"] == 2.375 and m["static"]["mean_ttft_steps"] == 5.0
    # the same numbers the CLI computes from the same records: the page and the CLI cannot disagree
    records = {lane: [t["lanes"][lane] for t in ticks if t["lanes"][lane]] for lane in ("static", "continuous")}
    assert m == json.loads(json.dumps(run_metrics(records, parse_workload(preset("mixed")))))
    # real tokens: the continuous lane writes what the model writes for each request alone
    texts = {rid: q["text"] for rid, q in m["continuous"]["requests"].items()}
    assert texts == {rid: q["text"] for rid, q in m["static"]["requests"].items()}
    assert "Paris" in texts["R1"]


def test_three_lanes_tick_together_until_the_slowest_is_done(app, connect):
    probe = connect(app)
    probe.emit("submit", {"workload": preset("same"), "lanes": ["static", "dynamic", "continuous"]})
    run_id = probe.wait_for("run_queued")["run_id"]
    finished = probe.wait_for("run_finished", run_id)
    ticks = probe.named("tick", run_id)
    assert [t["t"] for t in ticks] == list(range(1, 9))
    assert all(set(t["lanes"]) == {"static", "dynamic", "continuous"} for t in ticks)
    assert {lane: m["steps"] for lane, m in finished["metrics"].items()} == {"static": 8, "dynamic": 8, "continuous": 8}


def test_lane_configurations_run_on_one_clock_keyed_by_name_and_replay(app, connect):
    lanes = ["static", {"name": "chunked 64", "policy": "continuous", "chunk_size": 64},
             {"name": "continuous", "policy": "continuous"}, {"name": "8 slots", "policy": "continuous", "slots": 8}]
    probe = connect(app)
    probe.emit("submit", {"workload": preset("long-prompt"), "lanes": lanes})
    run_id = probe.wait_for("run_queued")["run_id"]
    started = probe.wait_for("run_started", run_id)
    names = ["static", "chunked 64", "continuous", "8 slots"]
    assert started["lanes"] == names and started["workload"]["lanes"] == [
        "static", lanes[1], "continuous", {"name": "8 slots", "policy": "continuous", "slots": 8}]
    finished = probe.wait_for("run_finished", run_id)
    ticks = sorted(probe.named("tick", run_id), key=lambda t: t["t"])
    records = {name: [t["lanes"][name] for t in ticks if t["lanes"][name]] for name in names}
    assert len(records["8 slots"][0]["slots"]) == 8 and len(records["static"][0]["slots"]) == 4
    chunks = [c["prefill"] for r in records["chunked 64"] for c in r["slots"] if c["request"] == "LONG" and c.get("prefill")]
    assert len(chunks) > 1 and all(b[0] - a[0] <= 64 for a, b in zip(chunks, chunks[1:]))
    # the server's metrics are the records' metrics, per lane name, and every lane wrote the same tokens
    workload = parse_workload(started["workload"])
    assert run_metrics(records, workload) == finished["metrics"]
    texts = {name: {rid: q["token_ids"] for rid, q in m["requests"].items()} for name, m in finished["metrics"].items()}
    assert all(t == texts["static"] for t in texts.values())
    replay = connect(app)
    replay.emit("watch", {"run_id": run_id})
    assert replay.wait_for("run_finished", run_id)["metrics"] == finished["metrics"]
    replayed = replay.wait_for("run_started", run_id)
    assert replayed["workload"]["lanes"] == started["workload"]["lanes"]
    # every lane as the engine resolved it, live, replayed and over HTTP alike: the slots the records show
    configs = started["lane_configs"]
    assert [configs[n]["config"]["slots"] for n in names] == [len(records[n][0]["slots"]) for n in names]
    assert configs["chunked 64"]["options"] == {"chunk_size": 64} and configs["chunked 64"]["config"]["chunk_size"] == 64
    assert [q["id"] for q in started["requests"]] == [q["id"] for q in started["workload"]["requests"]]
    stored = app.test_client().get(f"/api/runs/{run_id}").get_json()
    assert replayed["lane_configs"] == configs == stored["lane_configs"] and stored["requests"] == started["requests"]


def test_a_spectator_joining_mid_run_gets_every_tick_so_far_then_the_live_ones(make_app, connect, smol):
    engine = PausingEngine(smol)
    app = make_app(engine=engine)
    submitter, spectator = connect(app), connect(app)
    submitter.emit("submit", {"workload": preset("mixed")})
    run_id = submitter.wait_for("run_queued")["run_id"]
    assert engine.paused.wait(120)          # tick 1 was sent; the run waits before tick 2
    spectator.emit("watch", {"run_id": run_id})
    engine.resume.set()
    spectator.wait_for("run_finished", run_id)
    submitter.wait_for("run_finished", run_id)
    names = [n for n, _ in run_events(spectator, run_id)]
    assert names[0] == "run_started" and names[-1] == "run_finished"
    seen = spectator.named("tick", run_id)
    assert [t["t"] for t in seen] == list(range(1, 16))
    assert [t.get("replay") for t in seen] == [True] + [None] * 14    # the backlog, then live
    strip = lambda t: {k: v for k, v in t.items() if k not in ("replay", "sent_at")}
    assert [strip(t) for t in seen] == [strip(t) for t in submitter.named("tick", run_id)]


def test_watching_a_finished_run_replays_its_stored_records(app, connect):
    submitter = connect(app)
    submitter.emit("submit", {"workload": preset("one-long")})
    run_id = submitter.wait_for("run_queued")["run_id"]
    finished = submitter.wait_for("run_finished", run_id)
    assert finished["stored"] is True

    late = connect(app)
    late.emit("watch", {"run_id": run_id})
    names = [n for n, _ in run_events(late, run_id)]
    assert names == ["run_started"] + ["tick"] * 14 + ["run_finished"]
    assert late.named("run_finished", run_id)[0]["metrics"] == finished["metrics"]
    live = [{k: v for k, v in t.items() if k not in ("sent_at", "seq")} for t in submitter.named("tick", run_id)]
    assert [{k: v for k, v in t.items() if k != "replay"} for t in late.named("tick", run_id)] == live

    body = app.test_client().get(f"/api/runs/{run_id}").get_json()
    assert body["run_id"] == run_id and body["lanes"] == ["static", "continuous"]
    assert body["metrics"] == finished["metrics"]
    assert [r["step"] for r in body["records"]["continuous"]] == list(range(1, 13))


def test_watch_of_an_unknown_run_is_an_error_naming_run_id(app, connect):
    probe = connect(app)
    probe.emit("watch", {"run_id": "nosuchrun"})
    error = probe.wait_for("run_error")
    assert error["field"] == "run_id" and error["code"] == "not_found" and "nosuchrun" in error["message"]


def test_bad_input_gets_run_error_and_the_server_goes_on(app, connect):
    probe = connect(app)
    probe.emit("submit", {"workload": {"requests": [{"id": "A", "prompt": "", "max_new_tokens": 2}]}})
    error = probe.wait_for("run_error")
    assert error["field"] == "requests[0].prompt" and "empty" in error["message"]
    probe.emit("submit", {"workload": preset("same")})
    run_id = probe.wait_for("run_queued")["run_id"]
    assert probe.wait_for("run_finished", run_id)["metrics"]["continuous"]["steps"] == 8
