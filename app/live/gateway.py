"""Live traffic: the OpenAI API's requests on the engine worker's live lane, as streams, as a view, as a capture.

`LiveGateway.open` turns a checked API request into a `LiveStream` on the live lane, through a narrow handle
(app.live.handle.LaneHandle), never the worker; on the worker's thread each step feeds every stream its new
text (special tokens left out, stop strings cut and held back while they may still be forming) and its end.
The gateway also keeps what the Live view shows (recent steps and a summary per request, sent to the `live`
room after each step), the Prometheus metrics (app.live.prom) and the last requests for a capture: a workload
with their arrivals in ms, prompts and observed output lengths, which replays on any lanes. This module knows the live lane and the payloads, nothing of HTTP.
"""
import itertools
import queue
import threading
import time
from collections import OrderedDict

from engine.report.metrics import request_times
from engine.request import Request, RequestSpec
from engine.workload.siblings import sibling_id
from engine.step import StepRecord, StopReason

from ..protocol import Event, Send
from .capture import CaptureSpec, capture_workload
from .handle import LaneHandle

LIVE_ROOM = "live"
KEEP_REQUESTS = 200   # request summaries kept for the Live view and captures
TEXT_CHARS = 2000     # of a request's text, kept in its summary (the stream gets all of it)
SNAPSHOT_MS = 120_000  # the steps a Live view opens with: the last two minutes


class Unavailable(Exception):
    """The live lane cannot take a request now: `status` 503 (model loading) or 429 (queue full)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def summary_times(s: dict) -> dict[str, float | None]:
    """A live request's times from its summary's moments (it returns as it finishes): the lane metrics' own
    definition, as the Live view computes them (static/js/live/figures.js summaryTimes)."""
    return request_times(s["arrival_ms"], s["admitted_ms"], s["first_token_ms"], s["finish_ms"], s["finish_ms"],
                         s["tokens"])


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


class LiveStream:
    """One API request on the live lane: what the HTTP handler reads, as ("prompt", entries) once (a request that
    asked for prompt logprobs), ("text", delta, entries, tokens so far), then ("done", finish, usage, entries) or
    ("error", message). `entries`: engine.worker.logprobs.Entry of the tokens written since the last event (empty unless
    the request asked for logprobs). Several streams of one HTTP request (n, a list of prompts) may share one
    `events` queue: each then puts (its index, event)."""

    def __init__(self, gateway: "LiveGateway", spec: RequestSpec, index: int = 0, events: queue.Queue | None = None):
        self.gateway, self.spec, self.index = gateway, spec, index
        self.shared = events is not None
        self.events: queue.Queue = events if events is not None else queue.Queue()
        self.sent = ""            # visible text handed out so far
        self.logged = 0           # output tokens whose logprob entries were handed out
        self.prompt_sent = False
        self.done = False
        self.abandoned = False    # its client left before the end: nothing more is counted for it

    def _put(self, event: tuple) -> None:
        self.events.put((self.index, event) if self.shared else event)

    def _entries(self, request: Request) -> list:
        """The logprob entries of the tokens written since the last call (none where the request did not ask)."""
        got = request.token_logprobs[self.logged:request.num_tokens]
        self.logged += len(got)
        return got

    def feed(self, request: Request, record: StepRecord | None, decode) -> None:
        """On the worker's thread: the request's new text since the last step (with its tokens' logprobs), and its
        end."""
        finished = record is None or request.is_finished
        full = decode(request.output_ids) if request.output_ids else ""
        if not finished:  # a character split across tokens decodes as U+FFFD until its last byte comes
            full = full.rstrip("\ufffd")
        text, stopped = visible_text(full, self.spec.stop, finished)
        if self.spec.prompt_logprobs is not None and not self.prompt_sent and (request.num_tokens or finished):
            self.prompt_sent = True
            self._put(("prompt", list(request.prompt_logprobs)))
        if len(text) > len(self.sent):
            self._put(("text", text[len(self.sent):], self._entries(request), request.num_tokens))
            self.sent = text
        failure = self.gateway.lane.failure() if record is None else None
        if record is None and request.stop is StopReason.CANCELLED and failure and not self.done:
            self.done = True                      # the lane dropped it after a failed step: an error, not an end
            self._put(("error", failure))
            return
        if finished and not self.done:
            self.done = True
            reason = "length" if request.stop is StopReason.LENGTH else "stop"
            usage = {"prompt_tokens": len(self.spec.prompt_ids), "completion_tokens": request.num_tokens,
                     "total_tokens": len(self.spec.prompt_ids) + request.num_tokens,
                     "prompt_tokens_details": {"cached_tokens": min(request.num_from_cache, len(self.spec.prompt_ids))}}
            self._put(("done", reason, usage, self._entries(request)))

    def read(self, timeout: float):
        """The next event, or None after `timeout` seconds."""
        return next_event(self.events, timeout)

    def close(self) -> None:
        """The client is gone (or has all it wanted): drop the request if it still runs."""
        if not self.done:
            self.done = self.abandoned = True
            self.gateway.lane.cancel(self.spec.id)


class LiveGateway:
    def __init__(self, lane: LaneHandle, max_waiting: int, metrics=None):
        self.lane, self.max_waiting, self.metrics = lane, max_waiting, metrics
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.summaries: "OrderedDict[str, dict]" = OrderedDict()  # request id -> what the Live view shows
        self.counted: set[str] = set()        # request ids whose end /metrics has counted (of those summarised)
        self.prefilled: dict[str, int] = {}   # request id -> prompt tokens its prefill had cached (iteration tokens)
        if metrics is not None:
            metrics.watch(self.load, lane.model)

    def load(self) -> dict:
        """What the live lane holds now (running, waiting, KV): zero while there is no lane."""
        if not self.lane.ready():
            return {"running": 0, "waiting": 0, "kv_used": 0, "kv_capacity": 1}
        return self.lane.load()

    def ready_lane(self) -> LaneHandle:
        """The lane, once it takes requests; `Unavailable` (503) while the model is not ready."""
        if not self.lane.ready():
            raise Unavailable(503, "model_loading", f"the model is not ready: {self.lane.not_ready_reason()}")
        return self.lane

    def row_len(self) -> int:
        return self.ready_lane().row_len()

    def group_id(self) -> str:
        """The id of a request's n samples on the live lane: they open as `<it>·1`, `<it>·2`, ... (engine.workload.siblings)."""
        return f"L{next(self.ids)}"

    def open(self, prompt_ids: list[int], prompt: str, max_tokens: int, temperature: float, top_p: float,
             seed: int | None, stop: tuple[str, ...], ignore_eos: bool, *, min_tokens: int = 0,
             logprobs: int | None = None, prompt_logprobs: int | None = None, grammar: object = None,
             index: int = 0, events: queue.Queue | None = None, group: str | None = None,
             sample: int = 0) -> LiveStream:
        """A checked request on the live lane as a stream (`index`, `events`: one of several sharing a queue;
        `group`, `sample`: sample `sample` (from 1) of the request `group_id()` named, a sibling of the others)."""
        lane = self.ready_lane()
        if lane.queued() >= self.max_waiting:
            raise Unavailable(429, "queue_full", f"{lane.queued()} requests are waiting for the live lane, the limit is "
                              f"{self.max_waiting}; retry in a moment")
        rid = f"L{next(self.ids)}" if group is None else sibling_id(group, sample)
        spec = RequestSpec(id=rid, group=group, prompt=prompt, max_new_tokens=max_tokens, ignore_eos=ignore_eos,
                           prompt_ids=tuple(prompt_ids), temperature=temperature, top_p=top_p, seed=seed, stop=stop,
                           min_tokens=min_tokens, logprobs=logprobs, prompt_logprobs=prompt_logprobs, grammar=grammar)
        stream = LiveStream(self, spec, index, events)
        arrival = lane.submit(spec, lambda request, record: self._stepped(stream, request, record, lane.decode))
        with self.lock:
            self.summaries[spec.id] = {"id": spec.id, "prompt": prompt[:TEXT_CHARS], "prompt_tokens": len(prompt_ids),
                                       "max_tokens": max_tokens, "arrival_ms": arrival, "admitted_ms": None,
                                       "first_token_ms": None, "finish_ms": None, "tokens": 0, "text": "",
                                       "stop": None, "status": "waiting"}
            while len(self.summaries) > KEEP_REQUESTS:
                self.counted.discard(self.summaries.popitem(last=False)[0])
        if self.metrics is not None:
            self.metrics.arrived(len(prompt_ids))
        lane.wake()
        return stream

    def _stepped(self, stream: LiveStream, request: Request, record: StepRecord | None, decode) -> None:
        """On the worker's thread, after a step `request` took part in (record None: cancelled): its summary's
        moments on the lane clock, and the times they complete (engine.report.metrics.request_times) into /metrics."""
        if not stream.abandoned:   # its client left: nothing more is handed to it
            stream.feed(request, record, decode)
        end_ms = record.start_ms + record.ms if record is not None else self.lane.now_ms()
        with self.lock:
            s = self.summaries.get(request.id)
            if s is None:
                return
            known = {k for k, v in summary_times(s).items() if v is not None}
            written = request.num_tokens - s["tokens"]
            if s["admitted_ms"] is None and request.admitted_step is not None and record is not None:
                s["admitted_ms"] = record.start_ms
            if written > 0 and s["first_token_ms"] is None:
                s["first_token_ms"] = end_ms
            s.update(tokens=request.num_tokens, text=stream.sent[-TEXT_CHARS:],
                     status="running" if not request.is_finished else "finished")
            if request.is_finished and s["finish_ms"] is None:
                s.update(finish_ms=end_ms, stop=request.stop.value if request.stop else None)
            if self.metrics is None:
                return
            if stream.abandoned or record is None:   # its client left, or the lane dropped it: no more counting
                if request.is_finished and request.id not in self.counted:
                    self.counted.add(request.id)
                    self.metrics.ended("error" if record is None and self.lane.failure() else "abort")
                return
            new = {k: v for k, v in summary_times(s).items() if v is not None and k not in known}
            if "queue_ms" in new:
                self.metrics.admitted(new["queue_ms"] / 1000)
            if "ttft_ms" in new:
                self.metrics.first_token(new["ttft_ms"] / 1000)
            elif written > 0 and record is not None:
                self.metrics.tokens_after_first(written, record.ms / 1000)
            if written > 0:
                self.metrics.generated(written)
            if "latency_ms" in new and request.id not in self.counted:
                self.counted.add(request.id)
                self._finished(s, request)

    def _finished(self, s: dict, request: Request) -> None:
        """/metrics of a request that ended with its last token: its phases' times (lane ms) and sizes."""
        def span(a: str, b: str) -> float | None:
            return None if s[a] is None or s[b] is None else (s[b] - s[a]) / 1000
        self.metrics.finished("length" if request.stop is StopReason.LENGTH else "stop",
                              span("arrival_ms", "finish_ms"), span("admitted_ms", "first_token_ms"),
                              span("first_token_ms", "finish_ms"), span("admitted_ms", "finish_ms"),
                              s["prompt_tokens"], s["tokens"])

    def after_step(self, record: StepRecord) -> list[Send]:
        """On the worker's thread: the Live view's update for this step, sent to the `live` room."""
        ids = {c.request for c in record.slots if c.request} | set(record.waiting) | set(record.finished)
        with self.lock:
            requests = [dict(self.summaries[i]) for i in ids if i in self.summaries]
            if self.metrics is not None:
                self._count_step(record)
        return [Send(Event.LIVE_STEP, {"record": record.to_dict(), "requests": requests}, LIVE_ROOM)]

    def _count_step(self, record: StepRecord) -> None:
        """A step's share of /metrics (under the lock): the tokens it computed (prompt tokens prefilled, tokens
        written), its preemptions, and the prefix cache's lookups of the requests it (re)started."""
        tokens = queries = hits = 0
        for c in record.slots:
            if c.request is None:
                continue
            if c.prefill is not None:
                before = 0 if c.request in record.admitted else self.prefilled.get(c.request, 0)
                tokens += max(0, c.prefill[0] - before - c.cached)
                self.prefilled[c.request] = c.prefill[0]
            tokens += len(c.tokens) if c.tokens else c.token_id is not None
            if c.request in record.admitted and c.request in self.summaries:
                queries += self.summaries[c.request]["prompt_tokens"]
                hits += c.cached
        for request_id in (*record.finished, *record.returned, *record.preempted):
            self.prefilled.pop(request_id, None)
        self.metrics.stepped(preemptions=len(record.preempted), tokens=tokens, cache_queries=queries,
                             cache_hits=hits)

    def snapshot(self) -> dict:
        """What a Live view opens with: the lane, its recent steps and requests (`GET /api/live`, `watch_live`)."""
        live = self.lane if self.lane.ready() else None
        with self.lock:
            requests = [dict(s) for s in self.summaries.values()]
        return {"ready": live is not None, "model": self.lane.model(),
                "slots": live.slots() if live else None, "traits": live.traits() if live else None,
                "options": live.options() if live else None,
                "now_ms": live.now_ms() if live else None,
                "started_at": time.time() - (live.now_ms() / 1000 if live else 0),
                "records": [r.to_dict() for r in live.recent() if r.start_ms >= live.now_ms() - SNAPSHOT_MS]
                if live else [], "requests": requests}

    def capture(self, spec: CaptureSpec) -> dict:
        """The finished live requests `spec` picks (the last N, or those of the last S seconds) as a workload:
        arrivals in ms from the first (long gaps cut on request), prompts, observed output lengths (app.live.capture)."""
        live = self.ready_lane()
        with self.lock:
            summaries = [dict(s) for s in self.summaries.values()]
        return capture_workload(summaries, live.now_ms(), live.slots(), spec)
