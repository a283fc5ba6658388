"""A live request's stream (app.live.stream) built from its cells alone: the text it hands out is what decoding the
whole response every step gave (special tokens left out, stop strings cut, a tail that may become one held back),
its events are typed, and their wire form comes back the same."""
import json
import queue
import random

from engine.spec import RequestSpec
from engine.step import SlotRecord, SlotState, StepRecord, StopReason

from app.live.stream import (DoneEvent, ErrorEvent, LiveStream, PromptEvent, TextEvent, event_from_json, event_json,
                             visible_text)


def stream_of(stop=(), **kw) -> LiveStream:
    spec = RequestSpec(id="L1", prompt="p", max_new_tokens=100, prompt_ids=(1, 2, 3), stop=stop, **kw)
    return LiveStream(spec, cancel=lambda rid: None)


def step(n: int, cell: SlotRecord, finished: bool = False) -> StepRecord:
    return StepRecord(lane="live", step=n, slots=(cell,), finished=("L1",) if finished else ())


def events(stream: LiveStream) -> list:
    out = []
    while True:
        try:
            out.append(stream.events.get_nowait())
        except queue.Empty:
            return out


def whole_text_stream(pieces: list[tuple[str, bool]], stops: tuple[str, ...]) -> list[str]:
    """The text deltas as the gateway sent them before: the whole text decoded every step, cut and held back."""
    sent, out = "", []
    for n in range(1, len(pieces) + 1):
        full = "".join(t for t, special in pieces[:n] if not special)
        text, stopped = visible_text(full, stops, n == len(pieces))
        if len(text) > len(sent):
            out.append(text[len(sent):])
            sent = text
        if stopped:
            break
    return out


def test_the_text_handed_out_from_cells_is_what_whole_decodes_gave_with_stops_cut_and_held_back():
    rng = random.Random(3)
    alphabet = ["a", "b", "c", "ab", "bc", "\n", " c", "ca", "<|im_end|>"]
    for _ in range(300):
        stops = tuple(rng.sample(["ab", "bca", "c\n", "abc", "cc"], rng.randrange(0, 3)))
        pieces = [(t, t == "<|im_end|>") for t in rng.choices(alphabet, k=rng.randrange(1, 25))]
        for n in range(1, len(pieces) + 1):   # the request ends where a stop string completes, or at its length
            if visible_text("".join(t for t, special in pieces[:n] if not special), stops, False)[1]:
                pieces = pieces[:n]
                break
        s, got = stream_of(stops), []
        for n, (token, special) in enumerate(pieces, 1):
            last = n == len(pieces)
            cell = SlotRecord(SlotState.DECODE, "L1", token_id=n, token=token, special=special,
                              stop=StopReason.STOP if last else None)
            s.take(step(n, cell, last), cell)
            s.feed(step(n, cell, last), cell, None)
            got += [e.text for e in events(s) if isinstance(e, TextEvent) and e.text]   # (the first may be empty)
        assert got == whole_text_stream(pieces, stops), (pieces, stops)


def test_events_carry_logprobs_usage_and_the_prompt_from_cells_and_survive_their_wire_form():
    s = stream_of(logprobs=1, prompt_logprobs=0)
    e1, e2 = (5, -0.5, ((5, -0.5),)), (6, -1.0, ((7, -0.9),))
    first = SlotRecord(SlotState.PREFILL, "L1", token_id=5, token="Hi", prefill=(3, 3), cached=2, logprobs=(e1,),
                       prompt_logprobs=(None, (2, -3.0, ()), (3, -2.0, ())))
    last = SlotRecord(SlotState.DECODE, "L1", token_id=6, token="!", stop=StopReason.EOS, logprobs=(e2,))
    times = {"queue_ms": 0.0, "ttft_ms": 12.5, "tpot_ms": 3.0, "latency_ms": 15.5}   # the gateway's, at the end
    for n, cell in enumerate((first, last), 1):
        s.take(step(n, cell, n == 2), cell)
        s.feed(step(n, cell, n == 2), cell, None, times)
    got = events(s)
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "prompt_tokens_details": {"cached_tokens": 2}}
    assert got == [PromptEvent([None, (2, -3.0, ()), (3, -2.0, ())]), TextEvent("Hi", [e1], 1), TextEvent("!", [e2], 2),
                   DoneEvent("stop", usage, [], times)]
    assert [event_from_json(json.loads(json.dumps(event_json(e)))) for e in got] == got
    assert event_from_json(json.loads(json.dumps(event_json(ErrorEvent("boom"))))) == ErrorEvent("boom")


def test_a_request_the_lane_dropped_after_a_failed_step_ends_with_an_error():
    s = stream_of()
    s.take(None, None)
    s.feed(None, None, "the engine failed")
    assert events(s) == [ErrorEvent("the engine failed")] and s.stop is StopReason.CANCELLED


def test_logprobs_leave_out_the_tokens_the_text_leaves_out_past_a_stop_string_and_an_ending_eos():
    for stop, last, reason in ((("!",), ("!x", False), StopReason.STOP), ((), ("<|im_end|>", True), StopReason.EOS)):
        s = stream_of(stop, logprobs=0)
        pieces = [("Hi", False), (" there", False), last]
        for n, (token, special) in enumerate(pieces, 1):
            end = n == len(pieces)
            cell = SlotRecord(SlotState.DECODE, "L1", token_id=n, token=token, special=special,
                              stop=reason if end else None, logprobs=((n, -0.5, ()),))
            s.take(step(n, cell, end), cell)
            s.feed(step(n, cell, end), cell, None)
        got = events(s)
        text = "".join(e.text for e in got if isinstance(e, TextEvent))
        shown = [e[0] for ev in got if isinstance(ev, (TextEvent, DoneEvent)) for e in ev.entries]
        assert text == "Hi there" and shown == [1, 2], (stop, got)
        assert got[-1].usage["completion_tokens"] == 3          # usage counts every token written, as vLLM does
