"""The live lane as a served P/D pair (engine/live_pd.py, engine/live_prefill.py): a prefill worker process computes
the prompts and hands the KV blocks over shared memory to this process's decode engine, which streams the tokens.
On the tiny model saved as a folder (the worker loads it from there): the pair writes the colocated live lane's
greedy tokens, each hand-off's bytes are its blocks x the pool's block bytes and its five TTFT parts add up to the
time its first two tokens reached the listener; a worker that dies ends its requests with an error naming it while
the requests handed off already finish, and the next request starts a fresh worker."""
import os
import signal
import time

import pytest

from engine import Engine
from engine.config import live_config, live_pd
from engine.live import LiveLane
from engine.live_pd import LivePDLane
from engine.request import RequestSpec

PD = {"disaggregation": {"prefill": 1, "decode": 1}}
PROMPTS = ["Say hi.", "Name a colour, then tell a story about the sea.", "Count to three."]


@pytest.fixture(scope="module")
def pair(tiny_folder):
    """One served pair for the module: its worker's start (~5-15 s here) is paid once."""
    lane = LivePDLane(Engine(tiny_folder), slots=4, options=PD)
    yield lane
    lane.close()


def spec(lm, i: int, prompt: str, n: int) -> RequestSpec:
    return RequestSpec(id=f"L{i}", prompt=prompt, max_new_tokens=n, prompt_ids=tuple(lm.encode_prompt(prompt)),
                       ignore_eos=True)   # the worker's tokenizer names an EOS the in-process tiny model has not


class Heard:
    """What each request's listener heard: its tokens, when, and whether it was dropped (and why)."""

    def __init__(self, lane):
        self.lane, self.tokens, self.at, self.dropped = lane, {}, {}, {}

    def __call__(self, rid: str):
        def listener(record, cell):
            if record is None:
                self.dropped[rid] = self.lane.failure
            elif cell is not None and cell.token_id is not None:
                self.tokens.setdefault(rid, []).append(cell.token_id)
                self.at.setdefault(rid, []).append(record.start_ms + record.ms)
        return listener


def drive(lane, heard: Heard, specs, timeout_s: float = 120) -> None:
    for s in specs:
        lane.submit(s, heard(s.id))
    deadline = time.monotonic() + timeout_s
    while lane.has_work():
        assert time.monotonic() < deadline, "the pair did not finish"
        lane.step()
        lane.notify()
        lane.failure = None


@pytest.mark.slow
def test_served_pair_writes_the_colocated_lanes_tokens_its_blocks_copied_and_its_ttft_in_five_parts(tiny_folder,
                                                                                                       pair):
    specs = [spec(tiny_folder, i, p, 8) for i, p in enumerate(PROMPTS, 1)]
    colocated = Heard(None)
    drive(LiveLane(pair.engine, slots=4), colocated, specs)
    lane, heard = pair, Heard(pair)
    drive(lane, heard, specs)          # (the worker loads the model as the first request reaches it)
    assert heard.tokens == colocated.tokens and not heard.dropped
    handoffs = {h["request"]: h for h in lane.handoffs()}
    assert set(handoffs) == {s.id for s in specs}
    for s in specs:
        h = handoffs[s.id]
        assert h["blocks"] == -(-len(s.prompt_ids) // lane.config.kv_block_size)
        assert h["bytes"] == h["blocks"] * lane.lane.runner.block_bytes
        assert h["ttft_parts"]["transfer"] > 0 and min(h["ttft_parts"].values()) >= -0.01
        # the parts add up to the end of the decode engine's first step for it (its second token's)
        assert sum(h["ttft_parts"].values()) == pytest.approx(heard.at[s.id][1] - h["arrival_ms"], abs=0.01)
    prefill, decode = lane.processes()
    assert prefill["role"] == "prefill" and prefill["alive"] and prefill["pid"] != os.getpid()
    assert decode == {**decode, "role": "decode", "pid": os.getpid()}


def prefill_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.mark.slow
def test_a_prefill_worker_that_dies_ends_its_requests_with_an_error_and_the_pair_goes_on(tiny_folder, pair):
    lane, heard = pair, Heard(pair)
    lane.submit(spec(tiny_folder, 4, PROMPTS[0], 24), heard("L4"))
    deadline = time.monotonic() + 120
    while len(heard.tokens.get("L4", [])) < 2:                   # L4 handed off: the decode engine has it
        assert time.monotonic() < deadline, "L4 was never handed off"
        lane.step()
        lane.notify()
    pid = lane.worker.pid
    lane.submit(spec(tiny_folder, 5, PROMPTS[1], 4), heard("L5"))
    os.kill(pid, signal.SIGKILL)
    drive(lane, heard, [], timeout_s=60)
    assert "L5" in heard.dropped and f"prefill worker (pid {pid}) exited" in heard.dropped["L5"]
    assert lane.processes()[0]["exited"] == heard.dropped["L5"]     # what /healthz says of it
    assert len(heard.tokens["L4"]) == 24 and "L4" not in heard.dropped   # the decode engine went on
    lane.submit(spec(tiny_folder, 6, PROMPTS[2], 4), heard("L6"))    # the next request starts a fresh worker
    fresh = lane.worker.pid
    assert fresh != pid and prefill_alive(fresh)
    lane.close()                                                 # the pair's worker ends with the lane
    assert not prefill_alive(fresh)


def test_a_served_pair_is_one_prefill_worker_and_one_decode_engine_and_bad_shapes_name_the_field():
    assert live_pd(PD) and not live_pd({}) and not live_pd(None)
    for bad in ({"prefill": 2, "decode": 1}, {"prefill": 1}, "1+1"):
        with pytest.raises(ValueError, match="^disaggregation: a served P/D pair is"):
            live_config(4, 64, {"disaggregation": bad})
    assert live_config(4, 64, PD).slots == 4      # not an option of how the lane batches: it is taken out


def test_a_structured_output_request_to_a_served_pair_is_a_400_naming_its_parameter(tiny_folder, tmp_path):
    """The pair does not carry a grammar's state from the worker to the decode engine: the endpoint says so, naming
    the parameter that asked for one, and queues nothing; a plain request is served."""
    from app.web.factory import create_app
    app = create_app({"DATA_DIR": tmp_path, "LIVE_SLOTS": 2, "LIVE_OPTIONS": PD}, engine=Engine(tiny_folder))
    try:
        c = app.test_client()
        chat = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3}
        r = c.post("/v1/chat/completions", json={**chat, "response_format": {"type": "json_object"}})
        assert r.status_code == 400, r.get_data(as_text=True)
        err = r.json["error"]
        assert err["param"] == "response_format" and "P/D pair" in err["message"], err
        r = c.post("/v1/chat/completions", json={**chat, "ignore_eos": True})
        assert r.status_code == 200 and r.json["usage"]["completion_tokens"] == 3, r.get_data(as_text=True)
    finally:
        app.extensions["worker"].stop()
