"""One API request's stream on the live lane: its typed events, and what turns its cells of each step into them.

A `LiveStream` is what the HTTP handler reads: a `PromptEvent` once (a request that asked for prompt logprobs), a
`TextEvent` per piece of text (the first one as soon as a token exists, empty if it has no text yet), then a
`DoneEvent` or an `ErrorEvent`. On the worker's thread `feed` reads the request's cell of each step record: its text
(decoded once, incrementally, by the engine), its logprobs, its stop; never an engine `Request`. Special tokens are
left out of the text; a stop string cuts it, and a tail that may still become one is held back. Several streams of
one HTTP request (n, a list of prompts) may share one `events` queue: each then puts (its index, event).
`event_json` and `event_from_json` are the events' wire form between processes (app.live.remote,
app.runs.live_link). This module knows the step record and the events, nothing of HTTP.
"""
import queue
from dataclasses import dataclass

from engine.spec import RequestSpec
from engine.step import SlotRecord, StepRecord, StopReason


@dataclass(frozen=True)
class PromptEvent:
    entries: list     # the prompt's logprobs: an Entry (engine.worker.logprobs) per prompt token, None for the first


@dataclass(frozen=True)
class TextEvent:
    text: str         # the visible text since the previous TextEvent
    entries: list     # Entries of the tokens written since the previous event (empty unless logprobs were asked)
    tokens: int       # output tokens written so far


@dataclass(frozen=True)
class DoneEvent:
    finish: str       # "stop" or "length", as OpenAI spells it
    usage: dict       # prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details.cached_tokens
    entries: list     # Entries of the tokens whose text the last TextEvent completed (none past a stop string's cut,
                      # nor of a special token, EOS, that ends the text: logprobs describe exactly the returned text)
    times: dict       # its times on the lane clock, ms (app.live.gateway.summary_times: queue_ms, ttft_ms, tpot_ms,
                      # latency_ms; None where it never got that far): its trace span's queue, prefill and decode


@dataclass(frozen=True)
class ErrorEvent:
    message: str      # why the engine could not finish the request


StreamEvent = PromptEvent | TextEvent | DoneEvent | ErrorEvent
KINDS = {PromptEvent: "prompt", TextEvent: "text", DoneEvent: "done", ErrorEvent: "error"}


def event_json(event: StreamEvent) -> list:
    """An event's wire form: [kind, its fields in order]."""
    return [KINDS[type(event)], *event.__dict__.values()]


def entries_in(items) -> list:
    """engine.worker.logprobs.Entry tuples back from their JSON lists."""
    return [(t, p, tuple(tuple(x) for x in top)) for t, p, top in items]


def event_from_json(item: list) -> StreamEvent:
    """An event from its wire form."""
    kind, *fields = item
    if kind == "prompt":
        return PromptEvent([None if e is None else entries_in([e])[0] for e in fields[0]])
    if kind == "text":
        return TextEvent(fields[0], entries_in(fields[1]), fields[2])
    if kind == "done":
        return DoneEvent(fields[0], fields[1], entries_in(fields[2]), fields[3])
    return ErrorEvent(*fields)


def visible_text(full: str, stops: tuple[str, ...], finished: bool) -> tuple[str, bool]:
    """What may be sent of `full` now: cut before the first stop string (then the request is done); while not
    finished, without a tail that could still become a stop string. Returns (text, hit a stop string)."""
    cut = min((i for i in (full.find(s) for s in stops) if i >= 0), default=-1)
    if cut >= 0:
        return full[:cut], True
    if finished:
        return full, False
    hold = max((k for s in stops for k in range(len(s) - 1, 0, -1) if full.endswith(s[:k])), default=0)
    return full[:len(full) - hold], False


def next_event(events: queue.Queue, timeout: float):
    """A stream's next event from its queue, or None after `timeout` seconds (every live stream reads this way)."""
    try:
        return events.get(timeout=timeout)
    except queue.Empty:
        return None


TEXT_CHARS = 2000   # of a request's text, kept for its summary in the Live view (the stream gets all of it)


class LiveStream:
    """One API request on the live lane, as its cells come: the facts so far, and the events they make."""

    def __init__(self, spec: RequestSpec, cancel, index: int = 0, events: queue.Queue | None = None):
        self.spec, self.cancel, self.index = spec, cancel, index   # cancel(request id): the lane drops it
        self.shared = events is not None
        self.events: queue.Queue = events if events is not None else queue.Queue()
        self.unsent = ""          # the response's text (special tokens left out) not yet handed out: a stop string
                                  # can only begin here, since a beginning of one is always held back
        self.sent_tail = ""       # the last TEXT_CHARS of the text handed out
        self.tokens = 0           # output tokens written so far
        self.cached = 0           # prompt tokens its latest (re)start took from the prefix cache
        self.stop: StopReason | None = None   # why it ended (CANCELLED: dropped by the lane)
        self.pending: list = []   # (offset, Entry) of tokens written and not yet handed out: offset is where the
                                  # token's text begins in the response's text (a cell of several tokens: the cell's)
        self.chars = 0            # characters of response text written so far (handed out or not)
        self.sent_chars = 0       # ...handed out
        self.prompt_entries: list = []  # the prompt's Entries (prompt logprobs asked), from its first token's cell
        self.prompt_sent = False
        self.started = False      # a TextEvent has been put (the first one may be empty: a token with no text yet)
        self.done = False
        self.abandoned = False    # its client left before the end: nothing more is handed to it

    @property
    def finished(self) -> bool:
        return self.stop is not None

    def _put(self, event: StreamEvent) -> None:
        self.events.put((self.index, event) if self.shared else event)

    def _take_entries(self) -> list:
        """The Entries of the tokens whose text begins inside the text handed out so far (the first character of a
        token past a stop string's cut, or of an ending special token, never is: those are never handed out)."""
        got = [e for offset, e in self.pending if offset < self.sent_chars]
        self.pending = [(offset, e) for offset, e in self.pending if offset >= self.sent_chars]
        return got

    def take(self, record: StepRecord | None, cell: SlotRecord | None) -> int:
        """The facts of its cell in a step (record None: the lane dropped it); returns the tokens it wrote."""
        if record is None:
            self.stop = self.stop or StopReason.CANCELLED
            return 0
        written = 0
        if cell is not None:
            written = len(cell.tokens) if cell.tokens else int(cell.token_id is not None)
            self.tokens += written
            self.pending += [(self.chars, e) for e in cell.logprobs or ()]
            if cell.token and not cell.special:
                self.unsent += cell.token
                self.chars += len(cell.token)
            self.cached = cell.cached or self.cached
            if cell.prompt_logprobs is not None:
                self.prompt_entries = list(cell.prompt_logprobs)
            self.stop = cell.stop or self.stop
        return written

    def feed(self, record: StepRecord | None, cell: SlotRecord | None, failure: str | None,
             times: dict | None = None) -> None:
        """On the worker's thread, after `take`: the new visible text (with its tokens' logprobs), and the end (with
        `times`, the request's times on the lane clock so far)."""
        unsent = self.unsent if self.finished else self.unsent.rstrip("\ufffd")
        text, _ = visible_text(unsent, self.spec.stop, self.finished)
        if self.spec.prompt_logprobs is not None and not self.prompt_sent and (self.tokens or self.finished):
            self.prompt_sent = True
            self._put(PromptEvent(self.prompt_entries))
        if text:
            self.sent_chars += len(text)
            self._put(TextEvent(text, self._take_entries(), self.tokens))
            self.unsent, self.sent_tail = self.unsent[len(text):], (self.sent_tail + text)[-TEXT_CHARS:]
            self.started = True
        elif self.tokens and not self.started and not self.finished:   # a first token with no text yet (held back,
            self.started = True                                       # special, the simulator's): said, so the
            self._put(TextEvent("", [], self.tokens))                  # client's first chunk goes with it
        if record is None and failure and not self.done:   # the lane dropped it after a failed step: an error
            self.done = True
            self._put(ErrorEvent(failure))
            return
        if self.finished and not self.done:
            self.done = True
            prompt = len(self.spec.prompt_ids)
            usage = {"prompt_tokens": prompt, "completion_tokens": self.tokens, "total_tokens": prompt + self.tokens,
                     "prompt_tokens_details": {"cached_tokens": min(self.cached, prompt)}}
            self._put(DoneEvent("length" if self.stop is StopReason.LENGTH else "stop", usage, self._take_entries(),
                                times or {}))

    def read(self, timeout: float):
        """The next event, or None after `timeout` seconds."""
        return next_event(self.events, timeout)

    def close(self) -> None:
        """The client is gone (or has all it wanted): drop the request if it still runs."""
        if not self.done:
            self.done = self.abandoned = True
            self.cancel(self.spec.id)
