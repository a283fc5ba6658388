"""The warm-up: what it runs through the lanes' own code path (on the tiny random Llama), the progress it
reports, and the server showing it in `model_status` while the model loads. No timing is asserted: what the
warm-up buys is measured by `scripts/bench.py --sections first_vs_second_run`."""
import threading
import time
from typing import Callable

import pytest

import app.runs.loader
from engine import Engine, Limits, parse_workload
from engine.worker.fast_decode import FastDecode
from engine.warmup import warm_up


def decoder_calls(lm, monkeypatch) -> tuple[list[tuple[int, int]], Callable[[], None]]:
    """(the (rows, tokens) of every call of the decoder, as the model sees it or as the fast decode step is
    asked for it (one token a row); a function that stops recording)."""
    calls, fast_decode = [], FastDecode.decode
    hook = lm.model.model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)

    def recorded(self, ids, *args, **kwargs):
        calls.append((len(ids), 1))
        return fast_decode(self, ids, *args, **kwargs)

    monkeypatch.setattr(FastDecode, "decode", recorded)
    return calls, hook.remove


@pytest.mark.parametrize("max_slots", [1, 5])
def test_warm_up_runs_one_prefill_call_and_a_decode_call_of_every_row_count(tiny, max_slots, monkeypatch):
    calls, stop = decoder_calls(tiny, monkeypatch)
    try:
        done = warm_up(tiny, max_slots)
    finally:
        stop()
    assert done["prefill_rows"] == [max_slots]
    assert done["decode_rows"] == list(range(max_slots, 0, -1))
    assert done["steps"] == max_slots + 1 and done["seconds"] > 0
    # through the runner: one prefill call of every row (the whole prompt), then one one-token call per step,
    # at least as wide as its rows (a decode call may add idle filler rows)
    (rows, tokens), decodes = calls[0], calls[1:]
    assert rows == max_slots and tokens > 1
    assert [q for _, q in decodes] == [1] * max_slots
    assert all(b >= n for (b, _), n in zip(decodes, done["decode_rows"]))


def test_warm_up_reports_progress_forward_only_and_ends_at_one(tiny):
    seen = []
    warm_up(tiny, 4, progress=lambda fraction, message: seen.append((fraction, message)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(0.0 <= f <= 1.0 for f in fractions)
    assert [m for _, m in seen][:-1] == ["warming up: loading the decode kernel (built once per machine by make "
                                         "setup, else now: ~30 s)", "warming up: prefill 4 rows", "warming up: decode 4/4 rows",
                                         "warming up: decode 3/4 rows", "warming up: decode 2/4 rows",
                                         "warming up: decode 1/4 rows"]
    assert seen[-1][1].startswith("warmed up in ")


def test_a_run_after_the_warm_up_writes_the_same_tokens_as_before_it(tiny):
    engine = Engine(tiny)
    workload = engine.prepare(parse_workload({"name": "after", "slots": 2, "requests": [
        {"id": "A", "prompt": "Say hi.", "max_new_tokens": 4}, {"id": "B", "prompt": "Name a fruit.", "max_new_tokens": 3}]}))

    def tokens() -> dict:
        run = engine.start(workload, ["static", "continuous"])
        run.run_to_end()
        return {lane: [[c.token_id for c in r.slots] for r in recs] for lane, recs in run.records().items()}
    before = tokens()
    warm_up(tiny, 3)
    assert tokens() == before


def test_the_server_warms_the_model_up_while_it_loads_and_shows_it_in_model_status(make_app, connect, tiny, monkeypatch):
    gate, real_warm_up, box = threading.Event(), app.runs.loader.warm_up, {}

    def shown(progress) -> Callable[[float, str], None]:
        """`progress`, holding each report until the worker has published it (it polls every 0.1 s)."""
        def report(fraction: float, message: str) -> None:
            progress(fraction, message)
            deadline = time.monotonic() + 30
            while box["worker"].status["message"] != message:
                assert time.monotonic() < deadline, f"the worker never published {message!r}"
                time.sleep(0.01)
        return report

    def load_tiny(path, dtype, device, progress):
        assert gate.wait(60), "the test never opened the gate"
        shown(progress)(0.6, "loading weights")
        return tiny
    monkeypatch.setattr(app.runs.loader, "load_model", load_tiny)
    monkeypatch.setattr(app.runs.loader, "warm_up", lambda lm, max_slots, progress: real_warm_up(lm, max_slots, shown(progress)))
    flask_app = make_app({"LIMITS": Limits(max_slots=3)})
    box["worker"] = flask_app.extensions["worker"]
    probe = connect(flask_app)
    gate.set()
    deadline = time.monotonic() + 60
    while not any(s["ready"] for s in probe.named("model_status")):
        assert time.monotonic() < deadline, "the model never became ready"
        time.sleep(0.02)
    statuses = probe.named("model_status")
    messages = [s["message"] for s in statuses]
    warming = [s for s in statuses if s["message"].startswith("warming up: ")]
    # the app's max_slots (3), not the default 16: every row count a lane of this app can have
    assert [s["message"] for s in warming][-4:] == ["warming up: prefill 3 rows", "warming up: decode 3/3 rows",
                                                    "warming up: decode 2/3 rows", "warming up: decode 1/3 rows"]
    assert len(warming) == 4 or warming[0]["message"].startswith("warming up: loading the decode kernel")
    assert messages.index("loading weights") < messages.index("warming up: prefill 3 rows")
    assert all(app.runs.loader.LOAD_SHARE <= s["progress"] < 1.0 and not s["ready"] for s in warming)
    progress = [s["progress"] for s in statuses]
    assert progress == sorted(progress) and statuses[-1]["ready"] and statuses[-1]["progress"] == 1.0


def test_measure_noise_times_identical_decode_steps_and_reports_their_spread(tiny):
    from engine.warmup import measure_noise
    noise = measure_noise(tiny, steps=6)
    assert noise["steps"] == 6 and noise["median_ms"] > 0
    assert isinstance(noise["step_noise"], float) and noise["step_noise"] >= 0  # no timing asserted: only its shape
