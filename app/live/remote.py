"""The engine workers' live lanes as a web process of a scale-out deployment sees them: through Redis.

`RemoteGateway` stands where app.live.gateway.LiveGateway stands in one process (`app.extensions["live"]`), so the
OpenAI endpoint (app.web.openai_api) and /tokenize serve unchanged: `open` routes a checked request to the ready
engine worker with the fewest requests in flight and returns a `RemoteStream` whose events (the same typed events a
LiveStream puts) arrive from that worker's Redis list; `lane` is a `RemoteLane`, whose facts (row length, vocabulary,
slots, load) come from each worker's beat and whose tokenizing is a call answered by a worker.

    batch-lanes:live:workers          set of engine workers offering a live lane
    batch-lanes:live:<w>:alive        JSON {ready, model, row_len, vocab_size, slots, traits, running, waiting, ...},
                                      lapsing ALIVE_S after the worker's last beat (its streams then end with an error)
    batch-lanes:live:<w>:metrics      its live lane's /metrics text, written with the beat (app.live.remote_metrics)
    batch-lanes:live:<w>:in           list of JSON commands for worker w: open, cancel, call
    batch-lanes:live:inflight         hash worker -> requests in flight (a web process adds at routing, the worker
                                      subtracts at the request's end)
    batch-lanes:live:out:<rid>        list of a request's events, oldest first; reply:<id> a call's answer

The worker side is app.runs.live_link. This module knows redis-py and the stream events, nothing of HTTP or torch.
"""
import dataclasses
import json
import logging
import queue
import threading
import uuid

import redis

from .gateway import Unavailable
from .stream import DoneEvent, ErrorEvent, event_from_json, next_event

log = logging.getLogger("batch_lanes.live")
P = "batch-lanes:live:"
WORKERS = P + "workers"
INFLIGHT = P + "inflight"
LOST = P + "lost"    # worker -> requests that failed because it died (app.live.remote_metrics counts them as error)
ALIVE_S = 3.0        # a worker's beat lapses this long after it was written (it beats every BEAT_S)
BEAT_S = 1.0
CALL_TIMEOUT_S = 10  # a tokenizing call unanswered this long: 503
POLL_S = 1           # a stream's reader looks whether its worker is alive at least this often
KEEP_S = 120         # an event list or a reply nobody reads expires


def inbox(worker: str) -> str:
    return f"{P}{worker}:in"


def alive_key(worker: str) -> str:
    return f"{P}{worker}:alive"


def metrics_key(worker: str) -> str:
    return f"{P}{worker}:metrics"


def out_key(rid: str) -> str:
    return f"{P}out:{rid}"


class RemoteLane:
    """The LaneHandle methods a web process needs, answered from the workers' beats or by a worker's call."""

    def __init__(self, client: redis.Redis):
        self.r = client

    def workers(self) -> dict[str, dict]:
        """Every engine worker whose live beat has not lapsed: name -> its beat."""
        names = sorted(self.r.smembers(WORKERS))
        beats = self.r.mget([alive_key(n) for n in names]) if names else []
        return {n: json.loads(b) for n, b in zip(names, beats) if b}

    def ready_workers(self) -> dict[str, dict]:
        return {n: b for n, b in self.workers().items() if b["ready"]}

    def _info(self) -> dict | None:
        ready = self.ready_workers()
        return next(iter(ready.values()), None)

    def ready(self) -> bool:
        return self._info() is not None

    def not_ready_reason(self) -> str:
        return "no engine worker has its live lane ready" if not self.workers() else "the engine workers are loading"

    def model(self) -> str:
        info = self._info()
        return info["model"] if info else ""

    def row_len(self) -> int:
        return self._info()["row_len"]

    def vocab_size(self) -> int | None:
        info = self._info()
        return info["vocab_size"] if info else None

    def slots(self) -> int:
        return sum(b["slots"] for b in self.ready_workers().values())

    def traits(self) -> dict:
        return self._info()["traits"]

    def load(self) -> dict:
        """The workers' live lanes summed: {running, waiting, kv_used, kv_capacity}."""
        beats = list(self.ready_workers().values())
        return {k: sum(b[k] for b in beats) for k in ("running", "waiting", "kv_used", "kv_capacity")}

    def queued(self) -> int:
        return self.load()["waiting"]

    def failure(self) -> str | None:
        return None

    def call(self, method: str, *args, worker: str | None = None):
        """`method(*args)` on a ready worker's live driver (`worker`'s if given and ready); None if none is ready,
        ValueError as the worker raised it."""
        ready = self.ready_workers()
        if not ready:
            return None
        reply = f"{P}reply:{uuid.uuid4().hex}"
        self.r.rpush(inbox(worker if worker in ready else next(iter(ready))), json.dumps({"op": "call", "method": method, "args": args,
                                                           "reply": reply}))
        got = self.r.blpop([reply], timeout=CALL_TIMEOUT_S)
        if got is None:
            raise Unavailable(503, "engine_unreachable", f"no engine worker answered {method} in {CALL_TIMEOUT_S} s")
        answer = json.loads(got[1])
        if "error" in answer:
            raise ValueError(answer["error"])
        return answer["ok"]

    def encode_chat(self, messages: list[dict], prompt: str) -> list[int] | None:
        return self.call("encode_chat", messages, prompt)

    def encode_text(self, prompt: str) -> list[int] | None:
        return self.call("encode_text", prompt)

    def tokenize(self, prompt: str, add_special_tokens: bool) -> list[int] | None:
        return self.call("tokenize", prompt, add_special_tokens)

    def detokenize(self, ids: list[int]) -> str | None:
        return self.call("detokenize", ids)

    def decode(self, ids: list[int]) -> str:
        return self.call("decode", ids) or ""

    def token_texts(self, ids: list[int]) -> list[str]:
        return self.call("token_texts", ids) or [""] * len(ids)


class RemoteStream:
    """One request on a worker's live lane, its events read from Redis on a thread of its own into `events`."""

    def __init__(self, r: redis.Redis, worker: str, rid: str, index: int, events: queue.Queue | None):
        self.r, self.worker, self.rid, self.index = r, worker, rid, index
        self.shared = events is not None
        self.events: queue.Queue = events if events is not None else queue.Queue()
        self.done = False        # the reader stops: the request ended or its client left
        self.ended = False       # its last event (done or error) came
        self.cancelled = False   # a cancel was sent to its worker

    def _put(self, event) -> None:
        self.events.put((self.index, event) if self.shared else event)

    def pump(self) -> None:
        """Until the request ends or its client leaves: each event as it comes; an error if the worker dies."""
        try:
            while not self.done:
                got = self.r.blpop([out_key(self.rid)], timeout=POLL_S)
                if got is not None:
                    event = event_from_json(json.loads(got[1]))
                    self._put(event)
                    if isinstance(event, (DoneEvent, ErrorEvent)):
                        self.done = self.ended = True
                elif not self.r.exists(alive_key(self.worker)):
                    self._fail(f"the engine worker {self.worker} stopped mid-request (its beat lapsed)")
                    pipe = self.r.pipeline().hdel(INFLIGHT, self.worker)
                    if self.index == 0:   # a request's n choices are one request
                        pipe.hincrby(LOST, self.worker, 1)
                    pipe.execute()
        except redis.RedisError as e:
            self._fail(f"Redis unreachable while reading the request's events: {e}")
        finally:
            self._forget()

    def _fail(self, message: str) -> None:
        log.warning("live request %s: %s", self.rid, message)
        self.done = self.ended = True
        self._put(ErrorEvent(message))

    def _forget(self) -> None:
        try:
            self.r.delete(out_key(self.rid))
        except redis.RedisError:
            pass  # it expires by itself (KEEP_S)

    def read(self, timeout: float):
        return next_event(self.events, timeout)

    def close(self) -> None:
        """The client is gone (or has all it wanted): the worker drops the request if it still runs."""
        if self.ended or self.cancelled:
            return
        self.done = self.cancelled = True
        try:
            self.r.rpush(inbox(self.worker), json.dumps({"op": "cancel", "rid": self.rid}))
        except redis.RedisError as e:
            log.warning("live request %s: cancel not sent: %s", self.rid, e)


class RemoteGateway:
    """What the OpenAI endpoint asks of app.live.gateway.LiveGateway, for the engine workers' live lanes."""

    def __init__(self, url: str, max_waiting: int):
        # Its own pool: every open stream holds a connection in BLPOP, which must not starve the run book's.
        self.r = redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=3, socket_timeout=30)
        self.lane = RemoteLane(self.r)
        self.max_waiting = max_waiting

    def load(self) -> dict:
        return self.lane.load() if self.lane.ready() else {"running": 0, "waiting": 0, "kv_used": 0, "kv_capacity": 1}

    def ready_lane(self) -> RemoteLane:
        if not self.lane.ready():
            raise Unavailable(503, "model_loading", f"the model is not ready: {self.lane.not_ready_reason()}")
        return self.lane

    def row_len(self) -> int:
        return self.ready_lane().row_len()

    def route(self) -> str:
        """The ready worker with the fewest requests in flight (ties: by name); 429 when its queue is full."""
        ready = self.lane.ready_workers()
        if not ready:
            raise Unavailable(503, "model_loading", f"the model is not ready: {self.lane.not_ready_reason()}")
        inflight = self.r.hgetall(INFLIGHT)
        # max(0, ...): a count Redis lost (a restart) while requests ran is lowered below zero at their ends
        worker = min(ready, key=lambda w: (max(0, int(inflight.get(w, 0))), w))
        if ready[worker]["waiting"] >= self.max_waiting:
            raise Unavailable(429, "queue_full", f"{ready[worker]['waiting']} requests are waiting for the live lane "
                              f"of the least busy engine worker, the limit is {self.max_waiting}; retry in a moment")
        return worker

    def request_id(self, wanted: str | None = None) -> str:
        """`wanted` (a client's X-Request-Id) or a made id; the engine worker's gateway makes it unique on its lane."""
        return wanted or uuid.uuid4().hex[:12]

    def room(self, count: int) -> None:
        """429 when the least busy engine worker's queue is full (each choice is routed as it opens)."""
        self.route()

    def group_id(self, wanted: str | None = None) -> str:
        """A request's n samples, routed once: "<uuid>:<worker>", the worker that takes them all (its lane names
        them as its own; they share blocks only on one lane)."""
        return f"{uuid.uuid4().hex}:{self.route()}"

    def open(self, prompt_ids: list[int], prompt: str, max_tokens: int, temperature: float, top_p: float,
             seed: int | None, stop: tuple[str, ...], ignore_eos: bool, *, min_tokens: int = 0,
             logprobs: int | None = None, prompt_logprobs: int | None = None, grammar: str | None = None,
             index: int = 0, events: queue.Queue | None = None, group: str | None = None,
             sample: int = 0, echo_only: bool = False, request_id: str | None = None) -> RemoteStream:
        worker, rid = self.route() if group is None else group.split(":", 1)[1], uuid.uuid4().hex
        command = {"op": "open", "rid": rid, "prompt_ids": list(prompt_ids), "prompt": prompt, "max_tokens": max_tokens,
                   "temperature": temperature, "top_p": top_p, "seed": seed, "stop": list(stop),
                   "ignore_eos": ignore_eos, "min_tokens": min_tokens, "logprobs": logprobs,
                   "prompt_logprobs": prompt_logprobs, "group": group, "sample": sample,
                   "echo_only": echo_only, "request_id": request_id, "grammar": grammar}
        self.r.pipeline().hincrby(INFLIGHT, worker, 1).rpush(inbox(worker), json.dumps(command)).execute()
        stream = RemoteStream(self.r, worker, rid, index, events)
        threading.Thread(target=stream.pump, name=f"live {rid[:8]}", daemon=True).start()
        return stream

    def capture(self, spec) -> dict:
        """The Live view's capture (app.live.capture.CaptureSpec) of the first ready worker's finished requests: one
        lane's, as the Live view opens on it (each lane has its own clock)."""
        self.ready_lane()
        return self.lane.call("capture", dataclasses.asdict(spec))

    def snapshot(self, worker: str | None = None) -> dict:
        """What a Live view opens with here: one engine worker's live lane (`worker`, else the first ready one by
        name) as that worker's gateway has it, with `worker` naming it and `workers` listing every live lane (its
        steps then arrive tagged with their worker: the page keeps those of the lane it shows)."""
        beats = self.lane.workers()
        workers = [{"worker": n, "ready": b["ready"], "running": b["running"], "waiting": b["waiting"]}
                   for n, b in beats.items()]
        ready = [n for n, b in beats.items() if b["ready"]]
        if not ready:
            return {"ready": False, "model": self.lane.model(), "slots": None, "traits": None, "now_ms": None,
                    "started_at": None, "records": [], "requests": [], "worker": None, "workers": workers}
        shown = worker if worker in ready else ready[0]
        return {**self.lane.call("snapshot", worker=shown), "worker": shown, "workers": workers}
