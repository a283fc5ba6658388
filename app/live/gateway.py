"""Live traffic: the OpenAI API's requests on the engine worker's live lane, as streams, as a view, as a capture.

`LiveGateway.open` turns a checked API request into a `LiveStream` (app.live.stream) on the live lane, through a
narrow handle (app.live.handle.LaneHandle), never the worker; on the worker's thread each step's record feeds every
stream its request's cell: its text, its logprobs, its end. Only the step record crosses from the engine, never an
engine `Request`. The gateway keeps one `LiveRequest` per request: what the Live view shows (recent steps and a
summary per request, sent to the `live` room after each step), what /metrics has counted of it (app.live.prom), and
the last requests for a capture: a workload with their arrivals in ms, prompts and observed output lengths, which
replays on any lanes. This module knows the live lane and the payloads, nothing of HTTP.
"""
import itertools
import queue
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass

from engine.report.metrics import cell_prompt_tokens, evictions, request_times
from engine.spec import RequestSpec
from engine.workload.siblings import sibling_id
from engine.step import SlotRecord, StepRecord, StopReason

from ..protocol import Event, Send
from .capture import CaptureSpec, capture_workload
from .handle import LaneHandle
from .stream import TEXT_CHARS, LiveStream

LIVE_ROOM = "live"
KEEP_REQUESTS = 200   # request summaries kept for the Live view and captures
SNAPSHOT_MS = 120_000  # the steps a Live view opens with: the last two minutes


class Unavailable(Exception):
    """The live lane cannot take a request now: `status` 503 (model loading) or 429 (queue full)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def summary_times(s: "Summary") -> dict[str, float | None]:
    """A live request's times from its summary's moments (it returns as it finishes): the lane metrics' own
    definition, as the Live view computes them (static/js/live/figures.js summaryTimes)."""
    return request_times(s.arrival_ms, s.admitted_ms, s.first_token_ms, s.finish_ms, s.finish_ms, s.tokens)


@dataclass
class Summary:
    """What the Live view shows of a live request (its `to_dict` is the wire form), its moments on the lane clock."""
    id: str
    prompt: str                       # its first TEXT_CHARS
    prompt_tokens: int
    max_tokens: int
    arrival_ms: float
    admitted_ms: float | None = None
    first_token_ms: float | None = None
    finish_ms: float | None = None
    tokens: int = 0                   # output tokens written so far
    text: str = ""                    # the last TEXT_CHARS of the text handed out
    stop: str | None = None           # engine.step.StopReason's value, once it ended
    status: str = "waiting"           # waiting, running, finished

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LiveRequest:
    """Everything the gateway keeps of one live request, in one place."""
    summary: Summary
    stream: LiveStream
    prefilled: int = 0                # prompt tokens its prefill has read (engine.report.metrics.cell_prompt_tokens)
    counted: bool = False             # /metrics has counted its end
    preempted: int = 0                # times a step evicted it
    cached: int = 0                   # prompt tokens its last (re)start took from the prefix cache
    echo_only: bool = False           # completions' echo with max_tokens 0: the one token it computes is never
                                      # returned, so /metrics counts none (as usage does) and its end as "length"


class LiveGateway:
    def __init__(self, lane: LaneHandle, max_waiting: int, metrics=None):
        self.lane, self.max_waiting, self.metrics = lane, max_waiting, metrics
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        # request id -> its LiveRequest, the last KEEP_REQUESTS (more than can be in flight: max_waiting + slots)
        self.requests: "OrderedDict[str, LiveRequest]" = OrderedDict()
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

    def room(self, count: int) -> None:
        """`Unavailable` (429) unless `count` more requests fit in the live lane's queue now: a request's choices
        queue all or none."""
        queued = self.ready_lane().queued()
        if queued + count > self.max_waiting:
            raise Unavailable(429, "queue_full", f"{queued} requests are waiting for the live lane and this one brings "
                              f"{count}, the limit is {self.max_waiting}; retry in a moment")

    def request_id(self, wanted: str | None = None) -> str:
        """A fresh id for an API request on the live lane: `wanted` (a client's X-Request-Id) unless it, or an id
        made from it, is among the requests kept (then `wanted~N`); without one, `L<n>`."""
        with self.lock:
            while True:
                rid = wanted or f"L{next(self.ids)}"
                if not any(k == rid or k.startswith((rid + "·", rid + "-")) for k in self.requests):
                    return rid
                wanted = f"{wanted}~{next(self.ids)}" if wanted else None

    def group_id(self, wanted: str | None = None) -> str:
        """The id of a request's n samples on the live lane (`wanted`, from request_id, else made): they open as
        `<it>·1`, `<it>·2`, ... (engine.workload.siblings)."""
        return wanted or f"L{next(self.ids)}"

    def open(self, prompt_ids: list[int], prompt: str, max_tokens: int, temperature: float, top_p: float,
             seed: int | None, stop: tuple[str, ...], ignore_eos: bool, *, min_tokens: int = 0,
             logprobs: int | None = None, prompt_logprobs: int | None = None, grammar: str | None = None,
             index: int = 0, events: queue.Queue | None = None, group: str | None = None,
             sample: int = 0, echo_only: bool = False, request_id: str | None = None) -> LiveStream:
        """A checked request on the live lane as a stream (`index`, `events`: one of several sharing a queue;
        `group`, `sample`: sample `sample` (from 1) of the request `group_id()` named, a sibling of the others, whose
        prompt /metrics counts once, as usage does; `echo_only`: see LiveRequest; `request_id`: its id, from
        `request_id()`, else made; `grammar`: engine.structured's text, compiled by the lane's runner)."""
        lane = self.ready_lane()
        if lane.queued() >= self.max_waiting:
            raise Unavailable(429, "queue_full", f"{lane.queued()} requests are waiting for the live lane, the limit is "
                              f"{self.max_waiting}; retry in a moment")
        rid = (request_id or f"L{next(self.ids)}") if group is None else sibling_id(group, sample)
        spec = RequestSpec(id=rid, group=group, prompt=prompt, max_new_tokens=max_tokens, ignore_eos=ignore_eos,
                           prompt_ids=tuple(prompt_ids), temperature=temperature, top_p=top_p, seed=seed, stop=stop,
                           min_tokens=min_tokens, logprobs=logprobs, prompt_logprobs=prompt_logprobs, grammar=grammar)
        stream = LiveStream(spec, self.lane.cancel, index, events)
        live = LiveRequest(Summary(spec.id, prompt[:TEXT_CHARS], len(prompt_ids), max_tokens, 0.0), stream,
                           echo_only=echo_only)
        arrival = lane.submit(spec, lambda record, cell: self._stepped(live, record, cell))
        with self.lock:   # (a step it took part in before this is streamed, not summarised)
            live.summary.arrival_ms = arrival
            self.requests[spec.id] = live
            while len(self.requests) > KEEP_REQUESTS:
                self.requests.popitem(last=False)
        if self.metrics is not None and sample <= 1:   # n samples share their prompt: counted once
            self.metrics.arrived(len(prompt_ids), max_tokens)
        lane.wake()
        return stream

    def _stepped(self, live: LiveRequest, record: StepRecord | None, cell: SlotRecord | None) -> None:
        """On the worker's thread, after a step the request took part in (record None: dropped): its stream's
        events, its summary's moments on the lane clock, and the times they complete
        (engine.report.metrics.request_times) into /metrics."""
        stream, s = live.stream, live.summary
        written = stream.take(record, cell)
        counted = 0 if live.echo_only else written   # tokens returned to the client
        end_ms = record.start_ms + record.ms if record is not None else self.lane.now_ms()
        with self.lock:   # its moments first: its DoneEvent carries the times they make
            known = {k for k, v in summary_times(s).items() if v is not None}
            if s.admitted_ms is None and record is not None:
                s.admitted_ms = record.start_ms
            if written > 0 and s.first_token_ms is None:
                s.first_token_ms = end_ms
            s.tokens, s.status = stream.tokens, "finished" if stream.finished else "running"
            if stream.finished and s.finish_ms is None:
                s.finish_ms, s.stop = end_ms, stream.stop.value
            times = summary_times(s)
        if not stream.abandoned:   # its client left: nothing more is handed to it
            stream.feed(record, cell, self.lane.failure() if record is None else None, times)
        with self.lock:
            s.text = stream.sent_tail   # the text handed out, once it is
            if self.requests.get(s.id) is not live or self.metrics is None:
                return
            if stream.abandoned or record is None:   # its client left, or the lane dropped it: no more counting
                if stream.finished and not live.counted:
                    live.counted = True
                    self.metrics.ended("error" if record is None and self.lane.failure() else "abort")
                return
            new = {k: v for k, v in summary_times(s).items() if v is not None and k not in known}
            if "queue_ms" in new:
                self.metrics.admitted(new["queue_ms"] / 1000)
            if "ttft_ms" in new:
                self.metrics.first_token(new["ttft_ms"] / 1000)
            elif counted > 0:
                self.metrics.tokens_after_first(counted, record.ms / 1000)
            if counted > 0:
                self.metrics.generated(counted)
            if "latency_ms" in new and not live.counted:
                live.counted = True
                self._finished(live, StopReason.LENGTH if live.echo_only else stream.stop,
                               0 if live.echo_only else s.tokens)

    def _finished(self, live: LiveRequest, stop: StopReason, tokens: int) -> None:
        """/metrics of a request that ended with its last token: its phases' times (lane ms), sizes, preemptions
        and the prompt tokens its last (re)start took from the prefix cache."""
        s = live.summary
        def span(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else (b - a) / 1000
        self.metrics.finished("length" if stop is StopReason.LENGTH else "stop",
                              span(s.arrival_ms, s.finish_ms), span(s.admitted_ms, s.first_token_ms),
                              span(s.first_token_ms, s.finish_ms), span(s.admitted_ms, s.finish_ms),
                              s.prompt_tokens, tokens, live.preempted, live.cached)

    def after_step(self, record: StepRecord) -> list[Send]:
        """On the worker's thread: the Live view's update for this step, sent to the `live` room (the record
        serialized once, and counted from that form)."""
        rec = record.to_dict()
        ids = {c.request for c in record.slots if c.request} | set(record.waiting) | set(record.finished)
        with self.lock:
            requests = [self.requests[i].summary.to_dict() for i in ids if i in self.requests]
            if self.metrics is not None:
                self._count_step(rec)
                for handoff in getattr(self.lane, "handoffs", list)():   # a served P/D pair: the five TTFT parts, the copy's bytes
                    self.metrics.handed_off(handoff["ttft_parts"], handoff["bytes"])
        return [Send(Event.LIVE_STEP, {"record": rec, "requests": requests}, LIVE_ROOM)]

    def _count_step(self, rec: dict) -> None:
        """A step's share of /metrics (under the lock): the tokens it computed (prompt tokens prefilled, as the lane
        metrics count them; tokens written), its preemptions, and the prefix cache's lookups of the requests it
        (re)started."""
        tokens = queries = hits = 0
        for c in rec["slots"]:
            live = self.requests.get(c["request"]) if c["request"] else None
            if live is None:
                continue
            if c["request"] in rec["admitted"]:   # (re)started: its prefill reads from the beginning
                live.prefilled = 0
                queries += live.summary.prompt_tokens
                hits += c.get("cached", 0)
                live.cached = c.get("cached", 0)
            computed, _, live.prefilled = cell_prompt_tokens(c, live.prefilled)
            tokens += computed + (len(c["tokens"]) if c.get("tokens") else c["token_id"] is not None)
        evicted = evictions(rec)
        for request, _ in evicted:
            if request in self.requests:
                self.requests[request].preempted += 1
        self.metrics.stepped(preemptions=len(evicted), tokens=tokens, cache_queries=queries,
                             cache_hits=hits)

    def snapshot(self) -> dict:
        """What a Live view opens with: the lane, its recent steps and requests (`GET /api/live`, `watch_live`)."""
        live = self.lane if self.lane.ready() else None
        with self.lock:
            requests = [r.summary.to_dict() for r in self.requests.values()]
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
            summaries = [r.summary.to_dict() for r in self.requests.values()]
        return capture_workload(summaries, live.now_ms(), live.slots(), spec)
