"""Property-based fuzz of `submit` and `watch` (hypothesis): random and hostile payloads -- wrong types, huge
numbers, nested junk, unicode and control characters, near-valid workloads with one field broken -- each
get exactly one answer (a run_error, or a queued valid run), the server never crashes, and a valid run
afterwards still completes on the real model."""
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Engine
from engine.workload.workload import Limits

pytestmark = pytest.mark.model

LIMITS = Limits(max_requests=3, max_slots=3, max_new_tokens=3, max_prompt_chars=64, max_prompt_tokens=64,
                max_arrival=3, max_id_chars=8, max_name_chars=16)
VALID = {"name": "ok", "slots": 2, "requests": [{"id": "A", "prompt": "Say hi.", "max_new_tokens": 2},
                                               {"id": "B", "prompt": "Count.", "max_new_tokens": 1, "arrival": 1}]}
SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

hostile_text = st.one_of(
    st.text(max_size=40),                                                    # any unicode
    st.text(st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp"]), max_size=20),  # control, bidi
    st.sampled_from(["", " ", "\x00", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "\ud800x",
                     "R1", "static", "continuous", "__proto__", "a" * 5000, "é" * 100, "🙂" * 30, "${7*7}"]),
)
numbers = st.one_of(st.integers(), st.integers(-10, 10), st.sampled_from([2 ** 31, 2 ** 63, -2 ** 63, 10 ** 300]),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans())
scalars = st.one_of(st.none(), numbers, hostile_text)
json_junk = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                          st.dictionaries(hostile_text, inner, max_size=5)),
                         max_leaves=30)
# raw JSON text a client encoder could not even build: deep nesting, 100+ digit numbers, not JSON at all
raw_junk = st.one_of(
    st.integers(1, 5000).map(lambda depth: "[" * depth + "]" * depth),
    st.integers(1, 3000).map(lambda depth: '{"workload":' * depth + "{}" + "}" * depth),
    st.integers(101, 5000).map(lambda digits: '{"workload": {"slots": ' + "9" * digits + "}}"),
    st.sampled_from(['{"workload": ', "[1, 2", "{'single': 'quotes'}", "undefined", '"\\ud800"', "\u0000"]),
)


def emit_raw(probe, event: str, raw_args: list[str]) -> None:
    """Feed the server a Socket.IO EVENT packet whose arguments are raw JSON text, as a hostile client could."""
    text = "2[" + ",".join([f'"{event}"', *raw_args]) + "]"
    probe.client.socketio.server._handle_eio_message(probe.client.eio_sid, text)


@st.composite
def broken_workloads(draw):
    """VALID with one key of the workload, of a request or of the envelope replaced by junk, or added."""
    import copy
    workload = copy.deepcopy(VALID)
    where = draw(st.sampled_from(["workload", "request", "envelope"]))
    value = draw(json_junk)
    if where == "workload":
        workload[draw(st.sampled_from(["name", "slots", "requests", "policy", "max_wait", "kv_budget",
                                       "chunk_size", "fused", "description", "extra"]))] = value
    elif where == "request":
        request = workload["requests"][draw(st.integers(0, 1))]
        request[draw(st.sampled_from(["id", "prompt", "max_new_tokens", "ignore_eos", "arrival", "priority",
                                      "temperature"]))] = value
    envelope = {"workload": workload, "lanes": ["static", "continuous"]}
    if where == "envelope":
        envelope[draw(st.sampled_from(["workload", "lanes", "model"]))] = value
    return envelope


prompts = hostile_text.filter(lambda t: t.strip() and "\x00" not in t and len(t) <= 64)
valid_workloads = st.fixed_dictionaries({
    "workload": st.fixed_dictionaries({
        "slots": st.integers(1, 3),
        "requests": st.lists(st.fixed_dictionaries({"prompt": prompts, "max_new_tokens": st.integers(1, 3)},
                                                   optional={"arrival": st.integers(0, 3), "ignore_eos": st.booleans()}),
                             min_size=1, max_size=3).map(lambda rs: [dict(r, id=f"R{i}") for i, r in enumerate(rs)])}),
    "lanes": st.permutations(["static", "dynamic", "continuous"]).flatmap(lambda p: st.integers(1, 3).map(
        lambda n: p[:n]))})

# ("obj", args) are emitted by the test client; ("raw", [json text]) go over the wire as written
submit_args = st.one_of(
    valid_workloads.map(lambda p: ("obj", (p,))),                            # unicode, markup, control chars
    broken_workloads().map(lambda p: ("obj", (p,))),
    st.tuples(json_junk).map(lambda a: ("obj", a)),
    st.lists(json_junk, min_size=0, max_size=3).map(lambda a: ("obj", tuple(a))),  # no argument, or several
    st.fixed_dictionaries({"workload": json_junk, "lanes": json_junk}).map(lambda p: ("obj", (p,))),
    st.lists(raw_junk, min_size=1, max_size=2).map(lambda a: ("raw", a)),
)
watch_args = st.one_of(
    st.tuples(st.fixed_dictionaries({"run_id": st.one_of(json_junk, st.from_regex(r"[A-Za-z0-9_-]{1,64}",
                                                                                  fullmatch=True))}))
    .map(lambda a: ("obj", a)),
    st.tuples(json_junk).map(lambda a: ("obj", a)),
    st.lists(json_junk, max_size=3).map(lambda a: ("obj", tuple(a))),
    st.lists(raw_junk, min_size=1, max_size=2).map(lambda a: ("raw", a)),
)


def send(probe, event: str, how_args) -> None:
    how, args = how_args
    if how == "raw":
        emit_raw(probe, event, args)
    else:
        probe.emit(event, *args)


@pytest.fixture
def fuzz_app(make_app, smol):
    return make_app({"LIMITS": LIMITS, "SUBMITS_PER_MINUTE": 10 ** 6, "WATCHES_PER_MINUTE": 10 ** 6},
                    engine=Engine(smol))


def answers(probe, before: int) -> list[str]:
    return [name for name, _ in probe.poll()[before:] if name in ("run_error", "run_queued", "run_started")]


def wait_idle(book, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while book.active:
        assert time.monotonic() < deadline, "a fuzzed run did not end"
        time.sleep(0.05)


def test_fuzzed_submits_each_get_one_answer_and_a_valid_run_still_completes(fuzz_app, connect):
    probe = connect(fuzz_app)
    worker = fuzz_app.extensions["worker"]
    outcomes = []

    @SETTINGS
    @given(args=submit_args)
    def one_submit(args):
        before = len(probe.poll())
        send(probe, "submit", args)
        got = answers(probe, before)
        assert got in (["run_error"], ["run_queued"]), (args, got)  # answered at once, exactly once
        outcomes.append(got[0])
        if got == ["run_queued"]:  # its start belongs to this example, not to the next one's answers
            probe.wait_for("run_started", probe.named("run_queued")[-1]["run_id"])
        assert probe.client.is_connected()

    one_submit()
    refusals = {}
    for name, payload in probe.poll():
        if name == "run_error":
            refusals[payload["field"] if payload["code"] == "invalid" else payload["code"]] = True
    assert outcomes.count("run_error") > 150 and outcomes.count("run_queued") >= 1  # refused, and some ran ...
    assert {"message", "submit", "workload", "requests[0].prompt", "active_run"} <= set(refusals)
    assert "internal" not in refusals                 # no input reached an unchecked path
    wait_idle(fuzz_app.extensions["book"])            # ... and any valid one ran to its end
    for lanes in ("static", [{"policy": "turbo"}], ["static"] * 9):  # lanes the examples above may not have drawn
        probe.emit("submit", {"workload": VALID, "lanes": lanes})
        assert probe.named("run_error")[-1]["field"].startswith("lanes")
    assert worker._task.is_alive()
    queued = len(probe.named("run_queued"))
    probe.emit("submit", {"workload": VALID})
    assert len(probe.named("run_queued")) == queued + 1
    run_id = probe.named("run_queued")[-1]["run_id"]
    assert probe.wait_for("run_finished", run_id)["metrics"]["continuous"]["tokens"] == 3


def test_fuzzed_watches_each_get_one_answer_and_the_server_goes_on(fuzz_app, connect):
    probe = connect(fuzz_app)

    @SETTINGS
    @given(args=watch_args)
    def one_watch(args):
        before = len(probe.poll())
        send(probe, "watch", args)
        got = answers(probe, before)
        assert got == ["run_error"], (args, got)
        error = probe.poll()[-1][1]
        assert error["code"] in ("invalid", "not_found") and error["field"] in ("watch", "run_id", "message")

    one_watch()
    probe.emit("submit", {"workload": VALID})
    run_id = probe.wait_for("run_queued")["run_id"]
    assert probe.wait_for("run_finished", run_id)["metrics"]["static"]["tokens"] == 3
    other = connect(fuzz_app)
    other.emit("watch", {"run_id": run_id})
    assert other.wait_for("run_finished", run_id)["metrics"]["static"]["tokens"] == 3
