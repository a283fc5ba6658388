"""Socket.IO handlers (default namespace): check what a client sends, then hand it to the engine worker.

    connect -> model_status        submit {workload, lanes} -> run_queued, or run_error
    watch {run_id} -> backlog/replay, or run_error        disconnect -> the worker forgets the client
    sweep {workload, rates, lanes, slo_ttft_ms, slo_tpot_ms, burstiness} -> run_queued, or run_error
    cancel {run_id} -> the run or sweep ends with run_error (code "cancelled"), or run_error

Every refusal is one `run_error` `{message, field, run_id, code}` naming the field and the limit;
nothing unchecked reaches the engine. Logs carry sizes and timings, never prompt text. This module
knows the payload shapes and the limits, nothing of how runs are computed or stored.
"""
import json
import logging
import re
import threading
import time
from collections import deque
from typing import Callable, TypeVar

from engineio import json as engineio_json
from flask import current_app, request
from flask_socketio import emit
from socketio import packet

from engine.limits import check_number
from engine.sweep import check_rates
from engine.workload import Limits, Workload, WorkloadError, parse_workload

from .factory import socketio
from .runs import Rejected, error_payload
from .sweeps import LiveSweep

log = logging.getLogger("batch_lanes.events")
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
SUBMIT_KEYS = ("lanes", "workload")
SWEEP_KEYS = ("burstiness", "lanes", "rates", "slo_tpot_ms", "slo_ttft_ms", "workload")
UNREADABLE = "_unreadable"
T = TypeVar("T")  # the event a message that cannot be decoded turns into


class WireJSON:
    """The JSON codec of Socket.IO packets: a payload that is not JSON, nests too deep or holds a number longer
    than 100 digits decodes to an `_unreadable` event instead of raising, so its sender still gets a run_error."""
    dumps = staticmethod(engineio_json.dumps)

    @staticmethod
    def loads(text, **kwargs):
        try:
            return engineio_json.loads(text, **kwargs)
        except (RecursionError, ValueError) as e:
            return [UNREADABLE, type(e).__name__]


class WirePacket(packet.Packet):
    """Socket.IO packets decoded with `WireJSON` (engine.io's own packets keep the default codec)."""
    json = WireJSON


class RateLimiter:
    """At most `limit` events per client in any sliding window of `window_s` seconds."""

    def __init__(self, limit: int, window_s: float = 60.0):
        self.limit, self.window_s = limit, window_s
        self.times: dict[str, deque[float]] = {}
        self.lock = threading.Lock()

    def allow(self, client: str) -> bool:
        now = time.monotonic()
        with self.lock:
            times = self.times.setdefault(client, deque())
            while times and now - times[0] >= self.window_s:
                times.popleft()
            if len(times) >= self.limit:
                return False
            times.append(now)
            return True

    def forget(self, client: str) -> None:
        with self.lock:
            self.times.pop(client, None)


def check_submit(args: tuple, limits: Limits) -> Workload:
    """The workload of a `submit`, checked against `limits`, with the lanes it runs on; WorkloadError names the
    field. `lanes` (names or lane objects) replaces the workload's own lanes (static and continuous unless it
    names them)."""
    if len(args) != 1 or not isinstance(args[0], dict):
        raise WorkloadError("submit", 'must be one object {"workload": {...}, "lanes": [...]}')
    data = args[0]
    extra = sorted(k for k in data if k not in SUBMIT_KEYS)
    if extra:
        raise WorkloadError(extra[0], f"unknown key (allowed: {', '.join(SUBMIT_KEYS)})")
    if "workload" not in data:
        raise WorkloadError("workload", "is required")
    return parse_workload(data["workload"], limits, lanes=data.get("lanes"))


def check_sweep(args: tuple, max_rates: int) -> dict:
    """The options of a `sweep`, checked (the workload is checked at every rate by `prepare_sweep`)."""
    if len(args) != 1 or not isinstance(args[0], dict):
        raise WorkloadError("sweep", 'must be one object {"workload": {...}, "rates": [...], ...}')
    data = args[0]
    extra = sorted(str(k) for k in data if k not in SWEEP_KEYS)
    if extra:
        raise WorkloadError(extra[0], f"unknown key (allowed: {', '.join(SWEEP_KEYS)})")
    for key in ("workload", "rates"):
        if key not in data:
            raise WorkloadError(key, "is required")
    if not isinstance(data["workload"], dict):
        raise WorkloadError("workload", f"must be an object, got {type(data['workload']).__name__}")
    options = {"rates": check_rates(data["rates"], max_rates), "lanes": data.get("lanes")}
    for key, lo, hi in (("slo_ttft_ms", 1, 3_600_000), ("slo_tpot_ms", 1, 3_600_000), ("burstiness", 0.01, 100)):
        options[key] = None if data.get(key) is None else check_number(data[key], key, lo, hi)
    return options


def check_watch(args: tuple, event: str = "watch") -> str:
    if len(args) != 1 or not isinstance(args[0], dict) or set(args[0]) != {"run_id"}:
        raise Rejected("invalid", f'{event} takes one object {{"run_id": "..."}}', field=event)
    run_id = args[0]["run_id"]
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise Rejected("invalid", "run_id must be 1 to 64 letters, digits, '-' or '_'", field="run_id")
    return run_id


def _worker():
    return current_app.extensions["worker"]


def _limiter(name: str) -> RateLimiter:
    return current_app.extensions["rate_limits"][name]


@socketio.on("connect")
def on_connect(auth=None):
    emit("model_status", _worker().status)


@socketio.on("disconnect")
def on_disconnect(reason=None):
    for limiter in current_app.extensions["rate_limits"].values():
        limiter.forget(request.sid)
    _worker().forget(request.sid)


def _may_submit(sid: str):
    """The worker, once `sid` is within its submit rate limit and may queue work now; `Rejected` otherwise."""
    if not _limiter("submit").allow(sid):
        raise Rejected("rate_limited", f"too many submits: the limit is {current_app.config['SUBMITS_PER_MINUTE']} "
                                       f"per minute per client; wait a little")
    worker = _worker()
    worker.check_can_submit(sid)
    return worker


def _refusing(what: str, queue: Callable[[], T]) -> T | None:
    """`queue()`, or None after answering its refusal (bad input, or the server saying no) with one run_error."""
    try:
        return queue()
    except WorkloadError as e:
        log.info("%s refused: field %s", what, e.field[:80])
        emit("run_error", error_payload(str(e), e.field))
    except Rejected as r:
        log.info("%s refused: %s", what, r.code)
        emit("run_error", r.payload())
    return None


@socketio.on("submit")
def on_submit(*args):
    sid, t0 = request.sid, time.perf_counter()

    def queue():
        worker = _may_submit(sid)
        return worker.enqueue(sid, worker.prepare(check_submit(args, worker.limits)))
    live = _refusing("submit", queue)
    if live is None:
        return
    specs = live.workload.requests
    log.info("run %s queued: %d requests, %d prompt chars, %d prompt tokens, %d new tokens max, %d bytes, "
             "lanes %s, checked in %.1f ms", live.run_id, len(specs), sum(len(s.prompt) for s in specs),
             sum(len(s.prompt_ids) for s in specs), sum(s.max_new_tokens for s in specs),
             len(json.dumps(args[0])), ",".join(live.lanes), (time.perf_counter() - t0) * 1000)


@socketio.on("watch")
def on_watch(*args):
    try:
        if not _limiter("watch").allow(request.sid):
            raise Rejected("rate_limited", f"too many watches: the limit is {current_app.config['WATCHES_PER_MINUTE']} "
                                           f"per minute per client; wait a little")
        _worker().watch(request.sid, check_watch(args))
    except Rejected as r:
        emit("run_error", r.payload())


@socketio.on("sweep")
def on_sweep(*args):
    sid, t0 = request.sid, time.perf_counter()

    def queue():
        worker = _may_submit(sid)
        options = check_sweep(args, current_app.config["MAX_SWEEP_RATES"])
        prepared = worker.prepare_sweep(args[0]["workload"], options["rates"], options["lanes"], options["burstiness"])
        return worker.enqueue_sweep(sid, LiveSweep(prepared, args[0]["workload"], sid, options["slo_ttft_ms"],
                                                   options["slo_tpot_ms"], options["burstiness"]))
    sweep = _refusing("sweep", queue)
    if sweep is None:
        return
    log.info("sweep %s queued: %d rates x %d requests, lanes %s, checked in %.1f ms", sweep.run_id,
             len(sweep.prepared), len(sweep.prepared[0][1].requests), ",".join(sweep.lanes),
             (time.perf_counter() - t0) * 1000)


@socketio.on("cancel")
def on_cancel(*args):
    try:
        if not _limiter("watch").allow(request.sid):
            raise Rejected("rate_limited", "too many requests: wait a little")
        _worker().cancel(request.sid, check_watch(args, "cancel"))
    except Rejected as r:
        emit("run_error", r.payload())


@socketio.on(UNREADABLE)
def on_unreadable(*args):
    log.info("unreadable message refused")
    emit("run_error", error_payload("the message could not be read: it is not JSON, nests too deep or holds a "
                                    "number longer than 100 digits", "message"))


@socketio.on_error_default
def on_error(e):
    log.exception("socket handler failed: %s", type(e).__name__)
    emit("run_error", error_payload("the server hit an internal error; it has been logged", code="internal"))
