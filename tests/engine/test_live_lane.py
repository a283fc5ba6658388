"""The live lane (engine.live) and how the worker shares the engine between it and page runs: requests join
and leave a running lane, a cancelled request gives its slot back before the next step, a seeded sampled
request writes the same tokens whatever shares its batch, and page ticks and live steps alternate."""
import threading
import time

from engine import Engine
from engine.live import LiveLane
from engine.request import RequestSpec
from engine.step import StopReason

from app.live.stream import DoneEvent, ErrorEvent, TextEvent

from tests.kit.reference import solo_generate


def spec(lm, i: int, prompt: str, n: int, **kw) -> RequestSpec:
    ids = tuple(lm.encode_prompt(prompt)) if lm is not None else (0,) * 40
    return RequestSpec(id=f"L{i}", prompt=prompt, max_new_tokens=n, prompt_ids=ids, **kw)


def written(cell) -> tuple[int, ...]:
    """The tokens a request's cell of a step wrote (what its listener hears)."""
    return (cell.tokens or (cell.token_id,)) if cell is not None and cell.token_id is not None else ()


def drive(lane: LiveLane, specs: list[RequestSpec]) -> dict[str, list[int]]:
    """Submit `specs`, step until all are done; every request's tokens."""
    done = {}
    for s in specs:
        lane.submit(s, lambda rec, cell, s=s: done.setdefault(s.id, []).extend(written(cell)))
    while lane.has_work():
        lane.step()
        lane.notify()
    return done


def test_greedy_live_requests_equal_solo_generate_and_join_a_running_lane(tiny):
    lane = LiveLane(Engine(tiny), slots=4)
    first = spec(tiny, 1, "Say hi.", 12)
    lane.submit(first, lambda rec, cell: None)
    lane.step()
    lane.step()                                              # L1 runs; L2 and L3 come later
    got = drive(lane, [spec(tiny, 2, "Name a colour.", 6), spec(tiny, 3, "Count to three.", 9)])
    for s in (spec(tiny, 2, "Name a colour.", 6), spec(tiny, 3, "Count to three.", 9)):
        assert got[s.id] == solo_generate(tiny, s.prompt_ids, s.max_new_tokens)
    steps = [r for r in lane.recent if {"L1", "L2"} <= {c.request for c in r.slots}]
    assert steps, "L2 joined while L1 was running"


def sim_text(specs: list[RequestSpec]) -> dict[str, str]:
    """Each request's text on a simulator lane (its cells' words)."""
    lane, text = LiveLane(Engine(None), slots=4), {}
    for s in specs:
        lane.submit(s, lambda rec, cell, s=s: text.__setitem__(s.id, text.get(s.id, "") + (cell and cell.token or "")))
    while lane.has_work():
        lane.step()
        lane.notify()
    return text


def test_the_simulator_writes_the_same_words_for_the_same_prompt_and_stops_at_a_stop_string():
    same = RequestSpec(id="S1", prompt="a", max_new_tokens=6, prompt_ids=tuple(range(1, 41)), ignore_eos=True)
    other = RequestSpec(id="S2", prompt="b", max_new_tokens=6, prompt_ids=tuple(range(2, 42)), ignore_eos=True)
    first, again = sim_text([same, other]), sim_text([same])
    words = first["S1"].split(" ")
    assert first["S1"] == again["S1"] and len(words) == 6 and all(w.isalpha() for w in words)
    assert first["S2"] != first["S1"]
    cut = sim_text([RequestSpec(id="S3", prompt="a", max_new_tokens=6, prompt_ids=same.prompt_ids, ignore_eos=True,
                                stop=(words[2],))])["S3"]
    assert cut == " ".join(words[:words.index(words[2]) + 1])   # no word is inside another: it stops at the word


def test_a_seeded_sampled_request_writes_the_same_tokens_alone_or_in_a_crowd(tiny):
    sampled = spec(tiny, 1, "Tell a story.", 16, temperature=1.0, top_p=0.95, seed=42)
    alone = drive(LiveLane(Engine(tiny), slots=4), [sampled])["L1"]
    crowd = drive(LiveLane(Engine(tiny), slots=4),
                  [spec(tiny, 7, "Hello there.", 5, temperature=0.7), sampled, spec(tiny, 8, "Why?", 11, seed=1,
                                                                                     temperature=1.3)])["L1"]
    other_seed = drive(LiveLane(Engine(tiny), slots=4), [spec(tiny, 1, "Tell a story.", 16, temperature=1.0,
                                                              top_p=0.95, seed=43)])["L1"]
    assert alone == crowd and len(alone) == 16 and other_seed != alone


def test_a_cancelled_request_leaves_before_the_next_step_and_its_listener_hears_it():
    lane = LiveLane(Engine(None), slots=2)
    heard = []
    lane.submit(spec(None, 1, "x", 50), lambda rec, cell: heard.append((rec is None, cell is None)))
    lane.step()
    lane.step()
    request = lane.requests["L1"]
    lane.cancel("L1")
    assert lane.step() is None                               # nothing left to compute: the slot is free
    lane.notify()
    assert heard[-1] == (True, True) and request.stop is StopReason.CANCELLED and lane.scheduler.slots == [None, None]


def test_page_ticks_and_live_steps_alternate_so_neither_starves(make_app, connect):
    app = make_app({"LIVE_SLOTS": 2, "PACE": 0.5}, engine=Engine(None))  # page ticks take 30 ms and more
    worker, gateway = app.extensions["worker"], app.extensions["live"]
    order, lock = [], threading.Lock()
    emit = worker.emit

    def recording(sends):
        with lock:
            order.extend(str(s.event) for s in sends if str(s.event) in ("tick", "live_step"))
        emit(sends)
    worker.emit = recording
    probe = connect(app)
    probe.emit("submit", {"workload": {"slots": 2, "requests": [{"id": f"P{i}", "prompt": "page", "max_new_tokens": 40}
                                                                for i in (1, 2)]}})
    run_id = probe.wait_for("run_queued", timeout=30)["run_id"]
    probe.wait_for("tick", run_id, timeout=30)              # the page run plays; now live traffic comes
    streams = [gateway.open([0] * 40, "live", 30, 0.0, 1.0, None, (), True) for _ in range(2)]
    probe.wait_for("run_finished", run_id, timeout=120)
    deadline = time.monotonic() + 60
    while not all(s.done for s in streams):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with lock:
        both = order[order.index("tick"):len(order) - order[::-1].index("tick")]  # while the page run played
    assert both.count("tick") >= 40 and both.count("live_step") >= 25  # the live requests ran while the page played
    runs = "".join("t" if e == "tick" else "l" for e in both)
    assert "ll" not in runs.strip("l")                       # never two live steps between two page ticks


def test_a_failed_live_step_ends_its_requests_with_an_error_and_the_lane_serves_the_next(make_app):
    app = make_app({"LIVE_SLOTS": 2}, engine=Engine(None))
    gateway, worker = app.extensions["live"], app.extensions["worker"]
    lane = worker.ensure_live()
    run, calls = lane.lane.runner.run, []

    def broken_once(rows):
        calls.append(len(rows))
        if len(calls) == 1:
            raise RuntimeError("a broken kernel")
        return run(rows)
    lane.lane.runner.run = broken_once
    first = gateway.open([0] * 40, "first", 5, 0.0, 1.0, None, (), True)
    event = first.read(timeout=30)
    assert isinstance(event, ErrorEvent) and "a broken kernel" in event.message
    second = gateway.open([0] * 40, "second", 5, 0.0, 1.0, None, (), True)
    events = [second.read(timeout=30)]
    while isinstance(events[-1], TextEvent):      # (the simulator's words, one a token)
        events.append(second.read(timeout=30))
    assert isinstance(events[-1], DoneEvent) and events[-1].usage["completion_tokens"] == 5
