"""Socket.IO handlers (default namespace): check what a client sends, then hand it to the runs (app.runs.service).

    connect {client?} -> model_status    submit {workload, lanes} -> run_queued, or run_error
    watch {run_id} -> backlog/replay, or run_error        disconnect -> the runs forget the socket
    sweep {workload, rates, lanes, slo_ttft_ms, slo_tpot_ms, burstiness, backend} -> run_queued, or run_error
    cancel {run_id} -> the run or sweep ends with run_error (code "cancelled"), or run_error

Every refusal is one `run_error` `{message, field, run_id, code}` naming the field and the limit;
nothing unchecked reaches the engine. Logs carry sizes and timings, never prompt text. Rate limits count per
client: the id a page sends on connect (the same on every web process it reconnects to), else the socket.
This module knows the payload shapes and the limits, nothing of how runs are computed, queued or stored.
"""
import json
import logging
import re
import time
from typing import Callable, TypeVar

from flask import current_app, request
from flask_socketio import emit, join_room, leave_room

from engine.limits import check_number
from engine.report.sweep import check_rates
from engine.workload.workload import Limits, Workload, WorkloadError, parse_workload

from ..live.gateway import LIVE_ROOM
from ..protocol import RUN_ID, UNREADABLE, Event, Rejected, error_payload
from ..runs.job import BACKENDS, MODEL, RUN, SWEEP
from .extensions import socketio

log = logging.getLogger("batch_lanes.events")
SUBMIT_KEYS = ("lanes", "workload")
SWEEP_KEYS = ("backend", "burstiness", "lanes", "rates", "slo_tpot_ms", "slo_ttft_ms", "workload")
T = TypeVar("T")


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
    options["backend"] = data.get("backend", MODEL)
    if options["backend"] not in BACKENDS:
        raise WorkloadError("backend", 'must be "model" (the server\'s engine) or "sim" (the step-clock simulator)')
    return options


def check_watch(args: tuple, event: str = "watch") -> str:
    if len(args) != 1 or not isinstance(args[0], dict) or set(args[0]) != {"run_id"}:
        raise Rejected("invalid", f'{event} takes one object {{"run_id": "..."}}', field=event)
    run_id = args[0]["run_id"]
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise Rejected("invalid", "run_id must be 1 to 64 letters, digits, '-' or '_'", field="run_id")
    return run_id


def _runs():
    return current_app.extensions["runs"]


CLIENT_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
_clients: dict[str, str] = {}  # socket id -> the client id its page sent on connect


def client_of(sid: str) -> str:
    """The client id `sid`'s page sent on connect (the same across its reconnects), else the socket id."""
    return _clients.get(sid, sid)


def _allowed(name: str, sid: str) -> bool:
    return current_app.extensions["rate_limits"][name].allow(client_of(sid))


@socketio.on("connect")
def on_connect(auth=None):
    client = auth.get("client") if isinstance(auth, dict) else None
    if isinstance(client, str) and CLIENT_ID.fullmatch(client):
        _clients[request.sid] = client
    try:
        emit(Event.MODEL_STATUS, _runs().model_status())
    except Rejected as r:
        emit(Event.RUN_ERROR, r.payload())


@socketio.on("disconnect")
def on_disconnect(reason=None):
    sid = request.sid
    for limiter in current_app.extensions["rate_limits"].values():
        limiter.forget(sid)
    _clients.pop(sid, None)
    _runs().forget(sid)


def _may_submit(sid: str) -> None:
    """Nothing, once `sid` is within its submit rate limit (a class's teacher has none) and the model is ready;
    `Rejected` otherwise."""
    classes = current_app.extensions.get("classes")
    teacher = classes is not None and classes.is_teacher(sid)   # a class's teacher is outside the students' limit
    if not teacher and not _allowed("submit", sid):
        raise Rejected("rate_limited", f"too many submits: the limit is {current_app.config['SUBMITS_PER_MINUTE']} "
                                       f"per minute per client; wait a little")
    _runs().check_ready()


def _refusing(what: str, queue: Callable[[], T]) -> T | None:
    """`queue()`, or None after answering its refusal (bad input, or the server saying no) with one run_error."""
    try:
        return queue()
    except WorkloadError as e:
        log.info("%s refused: field %s", what, e.field[:80])
        emit(Event.RUN_ERROR, error_payload(str(e), e.field))
    except Rejected as r:
        log.info("%s refused: %s", what, r.code)
        emit(Event.RUN_ERROR, r.payload())
    return None


@socketio.on("submit")
def on_submit(*args):
    sid, t0 = request.sid, time.perf_counter()

    def queue():
        _may_submit(sid)
        workload = check_submit(args, current_app.config["LIMITS"])  # parsed once: the runs prepare this very one
        return _runs().submit(sid, RUN, args[0], workload.lane_names, workload), workload
    queued = _refusing("submit", queue)
    if queued is None:
        return
    job, specs = queued[0], queued[1].requests
    log.info("run %s queued: %d requests, %d prompt chars, %d new tokens max, %d bytes, lanes %s, checked in %.1f ms",
             job.run_id, len(specs), sum(len(s.prompt) for s in specs), sum(s.max_new_tokens for s in specs),
             len(json.dumps(args[0])), ",".join(job.lanes), (time.perf_counter() - t0) * 1000)


@socketio.on("watch")
def on_watch(*args):
    try:
        if not _allowed("watch", request.sid):
            raise Rejected("rate_limited", f"too many watches: the limit is {current_app.config['WATCHES_PER_MINUTE']} "
                                           f"per minute per client; wait a little")
        _runs().watch(request.sid, check_watch(args))
    except Rejected as r:
        emit(Event.RUN_ERROR, r.payload())


@socketio.on("sweep")
def on_sweep(*args):
    sid, t0 = request.sid, time.perf_counter()

    def queue():
        _may_submit(sid)
        options = check_sweep(args, current_app.config["MAX_SWEEP_RATES"])
        lanes = parse_workload(args[0]["workload"], current_app.config["LIMITS"], lanes=options["lanes"]).lane_names
        return _runs().submit(sid, SWEEP, {**options, "workload": args[0]["workload"]}, lanes)
    job = _refusing("sweep", queue)
    if job is not None:
        log.info("sweep %s queued: %d rates, lanes %s, checked in %.1f ms", job.run_id, len(job.request["rates"]),
                 ",".join(job.lanes), (time.perf_counter() - t0) * 1000)


@socketio.on("cancel")
def on_cancel(*args):
    try:
        if not _allowed("watch", request.sid):
            raise Rejected("rate_limited", "too many requests: wait a little")
        _runs().cancel(request.sid, check_watch(args, "cancel"))
    except Rejected as r:
        emit(Event.RUN_ERROR, r.payload())


@socketio.on("watch_live")
def on_watch_live(*args):
    """Join the Live view's room: the live lane as it is now, then every step (a page drops steps it already has)."""
    live = current_app.extensions.get("live")
    if live is None:
        emit(Event.RUN_ERROR, error_payload("this process has no live lane", code="unavailable"))
        return
    join_room(LIVE_ROOM)
    worker = args[0].get("worker") if args and isinstance(args[0], dict) else None  # scale-out: which worker's lane
    emit(Event.LIVE_SNAPSHOT, live.snapshot(worker) if isinstance(worker, str) and len(worker) <= 200 else live.snapshot())


@socketio.on("unwatch_live")
def on_unwatch_live(*args):
    leave_room(LIVE_ROOM)


@socketio.on(UNREADABLE)
def on_unreadable(*args):
    """A frame app.web.frames ignored (and logged, at one line): its sender is told why."""
    why = args[0] if args and isinstance(args[0], str) else "it is not a message this server reads"
    emit(Event.RUN_ERROR, error_payload(f"the message could not be read: {why}", "message"))


@socketio.on_error_default
def on_error(e):
    log.exception("socket handler failed: %s", type(e).__name__)
    emit(Event.RUN_ERROR, error_payload("the server hit an internal error; it has been logged", code="internal"))
