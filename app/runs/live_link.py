"""An engine worker's live lane offered to the web processes of a scale-out deployment, through Redis.

The web side is app.live.remote (its docstring lists the keys). Here, on a thread of its own, the link takes the
commands web processes push to this worker's inbox: `open` a request on the worker's own LiveGateway (stop
strings, text deltas and logprobs worked out here, as in one process), `cancel` one whose client left, `call` a
tokenizing method of the live driver (or the gateway's snapshot, for a Live view). Each request's events go to its Redis list as the stepping thread puts
them; its end (done, error or cancel) takes it off the worker's in-flight count. A beat every BEAT_S says the
lane is alive and what it holds (and its /metrics text); a worker that stops beating for ALIVE_S is dead to the web processes.
This module knows redis-py, the live gateway and driver, nothing of HTTP.
"""
import json
import logging
import threading
from collections import OrderedDict

import redis

from ..live.capture import CaptureSpec
from ..live.gateway import LiveGateway, Unavailable
from ..live.remote import ALIVE_S, INFLIGHT, KEEP_S, WORKERS, alive_key, inbox, metrics_key, out_key
from ..live.stream import DoneEvent, ErrorEvent, StreamEvent, event_json

log = logging.getLogger("batch_lanes.live_link")
GROUPS_KEPT = 1024   # groups of samples remembered: far more than one request's samples open apart
CALLS = ("encode_chat", "encode_text", "tokenize", "detokenize", "decode", "token_texts")


class RedisEvents:
    """The `events` queue of one request's LiveStream: each event pushed to the request's Redis list."""

    def __init__(self, link: "LiveLink", rid: str):
        self.link, self.rid = link, rid

    def put(self, item: tuple[int, StreamEvent]) -> None:
        _, event = item
        try:
            self.link.r.pipeline().rpush(out_key(self.rid), json.dumps(event_json(event))).expire(
                out_key(self.rid), KEEP_S).execute()
        except redis.RedisError as e:   # the web process's reader ends the stream when it sees Redis gone
            log.warning("live request %s: event not sent: %s", self.rid, e)
        if isinstance(event, (DoneEvent, ErrorEvent)):
            self.link.ended(self.rid)


class LiveLink:
    def __init__(self, client: redis.Redis, me: str, driver, gateway: LiveGateway):
        self.r, self.me, self.driver, self.gateway = client, me, driver, gateway
        self.lock = threading.Lock()
        self.streams: dict = {}   # request id -> its LiveStream, until its end
        self.groups: OrderedDict = OrderedDict()   # a web process's group of samples -> its id on this lane (recent)

    def beat(self) -> None:
        """Say the live lane is alive, ready or not, and what it holds now."""
        ready = self.driver.ready()
        info = {"ready": ready, "model": self.driver.model(), **self.driver.load(),
                "row_len": self.driver.row_len() if ready else None,
                "vocab_size": self.driver.vocab_size() if ready else None,
                "slots": self.driver.slots() if ready else 0, "traits": self.driver.traits() if ready else None}
        pipe = self.r.pipeline().set(alive_key(self.me), json.dumps(info), px=int(ALIVE_S * 1000))
        if self.gateway.metrics is not None:
            pipe.set(metrics_key(self.me), self.gateway.metrics.exposition().decode(), px=int(ALIVE_S * 1000))
        pipe.sadd(WORKERS, self.me).execute()

    def leave(self) -> None:
        self.r.pipeline().delete(alive_key(self.me), metrics_key(self.me)).srem(WORKERS, self.me).hdel(INFLIGHT, self.me).execute()

    def serve_one(self, timeout: float = 1.0) -> None:
        """Take the next command from this worker's inbox (waiting up to `timeout` s) and do it."""
        got = self.r.blpop([inbox(self.me)], timeout=timeout)
        if got is None:
            return
        command = json.loads(got[1])
        op = command["op"]
        if op == "open":
            try:
                self._open(command)
            except Exception as e:  # a request the lane could not take must still end, or its client waits
                log.exception("live request %s not opened", command["rid"])
                RedisEvents(self, command["rid"]).put((0, ErrorEvent(f"the engine worker could not take the request: "
                                                                    f"{type(e).__name__}: {e}")))
        elif op == "cancel":
            with self.lock:
                stream = self.streams.get(command["rid"])
            if stream is not None:
                stream.close()
                self.ended(command["rid"])
        elif op == "call":
            self._call(command)

    def _open(self, c: dict) -> None:
        rid = c["rid"]
        events = RedisEvents(self, rid)
        with self.lock:
            self.streams[rid] = None
        group = c.get("group")
        if group is not None and group not in self.groups:   # commands come one at a time: no lock needed
            self.groups[group] = self.gateway.group_id()
            while len(self.groups) > GROUPS_KEPT:
                self.groups.popitem(last=False)
        try:
            stream = self.gateway.open(c["prompt_ids"], c["prompt"], c["max_tokens"], c["temperature"], c["top_p"],
                                       c["seed"], tuple(c["stop"]), c["ignore_eos"], min_tokens=c["min_tokens"],
                                       logprobs=c["logprobs"], prompt_logprobs=c["prompt_logprobs"],
                                       grammar=c.get("grammar"), events=events,
                                       group=self.groups.get(group), sample=c.get("sample", 0),
                                       echo_only=c.get("echo_only", False),
                                       request_id=self.gateway.request_id(c["request_id"]) if c.get("request_id")
                                       and group is None else None)
        except Unavailable as e:
            events.put((0, ErrorEvent(e.message)))
            return
        with self.lock:
            if rid in self.streams:
                self.streams[rid] = stream

    def ended(self, rid: str) -> None:
        """The request is over: off the in-flight count, once."""
        with self.lock:
            if rid not in self.streams:
                return
            del self.streams[rid]
        try:
            self.r.hincrby(INFLIGHT, self.me, -1)
        except redis.RedisError as e:
            log.warning("in-flight count not lowered: %s", e)

    def _call(self, c: dict) -> None:
        if c["method"] == "snapshot":   # what a Live view on a web process opens with, for this worker's lane
            answer = {"ok": self.gateway.snapshot()}
        elif c["method"] == "capture":  # the Live view's capture of this worker's finished requests
            answer = {"ok": self.gateway.capture(CaptureSpec(**c["args"][0]))}
        elif c["method"] not in CALLS:
            answer = {"error": f"no such call: {c['method']}"}
        else:
            try:
                answer = {"ok": getattr(self.driver, c["method"])(*c["args"])}
            except ValueError as e:
                answer = {"error": str(e)}
        self.r.pipeline().rpush(c["reply"], json.dumps(answer)).expire(c["reply"], KEEP_S).execute()
