"""The wire protocol: every event name and payload the server sends, the JSON codec of its packets, and what
a run book hands back for its caller to deliver.

Live runs and replays build their payloads here, so a replayed run sends the very events a live one did.
Events a run's room gets (run_started, tick, run_finished, run_error, sweep_*) are numbered `seq` = 1, 2, 3 ...
in the order its run book logged them: a watcher that was sent the log up to `seq` n is never sent event n
again (app.runs.fanout), which is how a late spectator on any web process gets every tick exactly once. This
module knows JSON and the payload shapes, nothing of sockets, Redis or the engine.
"""
import logging
import re
import secrets
import time
from dataclasses import dataclass
from enum import StrEnum

from engineio import json as engineio_json
from socketio import packet

from engine.limits import CLI_LIMITS, WorkloadError
from engine.sched.policies import policy_traits
from engine.workload.announce import announced
from engine.workload.workload import parse_workload

NAMESPACE = "/"
UNREADABLE = "_unreadable"  # the event a message that cannot be decoded turns into
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what a run id a client sends may look like (new_run_id makes 12 of these)

log = logging.getLogger("batch_lanes.protocol")


class Event(StrEnum):
    """Events the server sends (static/js/core/vocab.js's ServerEvent and the sweep page's names)."""
    MODEL_STATUS = "model_status"
    RUN_QUEUED = "run_queued"
    RUN_STARTED = "run_started"
    TICK = "tick"
    RUN_FINISHED = "run_finished"
    RUN_ERROR = "run_error"
    SWEEP_STARTED = "sweep_started"
    SWEEP_PROGRESS = "sweep_progress"
    SWEEP_POINT = "sweep_point"
    SWEEP_FINISHED = "sweep_finished"
    LIVE_SNAPSHOT = "live_snapshot"  # the live lane as a Live view opens: its recent steps and requests
    LIVE_STEP = "live_step"        # one step of the live lane (the OpenAI API's traffic), to the `live` room
    CLASS_STATE = "class_state"    # a class as its member sees it: code, role, submits allowed, the teacher's run
    CLASS_CLOSED = "class_closed"  # the class ended (closed by its teacher, or the teacher left): {code, message}
    RUN_PAUSED = "run_paused"      # a class's teacher paused or resumed the run: {run_id, paused, reason}, logged


class RunStatus(StrEnum):
    QUEUED = "queued"        # waiting for an engine worker
    RUNNING = "running"      # an engine worker is stepping its lanes
    FINISHED = "finished"    # every lane is done; metrics computed
    FAILED = "failed"        # an exception (or its engine worker's death) ended it
    CANCELLED = "cancelled"  # nobody watched it any more, its submitter stopped it, or the server stopped

    @property
    def is_live(self) -> bool:
        return self in (RunStatus.QUEUED, RunStatus.RUNNING)


@dataclass(frozen=True)
class Send:
    """Send `payload` as `event` to `to` (a socket id or a run's room); `local`: only to this process's sockets."""
    event: str
    payload: dict
    to: str | None = None
    local: bool = False


@dataclass(frozen=True)
class Enter:
    """Put socket `sid` in `room` (before anything sent after it)."""
    sid: str
    room: str


class Rejected(Exception):
    """A client request the server refuses; becomes one `run_error` event."""

    def __init__(self, code: str, message: str, field: str | None = None, run_id: str | None = None):
        super().__init__(message)
        self.code, self.message, self.field, self.run_id = code, message, field, run_id

    def payload(self) -> dict:
        return error_payload(self.message, self.field, self.run_id, self.code)


def new_run_id() -> str:
    return secrets.token_urlsafe(9)  # 12 URL-safe characters, 72 random bits


def _shorten(text: str | None, limit: int) -> str | None:
    return text if text is None or len(text) <= limit else text[:limit - 1] + "\u2026"


def error_payload(message: str, field: str | None = None, run_id: str | None = None, code: str = "invalid") -> dict:
    """A `run_error`; message and field are shortened, since a hostile key or value may be echoed in them."""
    return {"message": _shorten(message, 500), "field": _shorten(field, 200), "run_id": run_id, "code": code}


def ended_payload(run_id: str, status: RunStatus, reason: str) -> dict:
    """The `run_error` of a run or sweep that ended without finishing."""
    code = "cancelled" if status is RunStatus.CANCELLED else "failed"
    return error_payload(f"run {run_id} {status.value}: {reason}", None, run_id, code)


def queued_payload(run_id: str, position: int, ahead: dict | None = None) -> dict:
    """`run_queued`; a class's job adds `ahead`: {"teacher", "student", "other"} runs queued before it."""
    return {"run_id": run_id, "position": position, **({} if ahead is None else {"ahead": ahead})}


def started_payload(run_id: str, lanes: list[str], workload: dict, model: str,
                    prompt_tokens: dict[str, int] | None = None, resolved: dict | None = None) -> dict:
    """`run_started`, live or replayed: the workload as written, and as the engine resolved it (`lane_configs`:
    every lane's every option; `requests`: siblings expanded; engine.workload.announce), so that the page rebuilds
    neither; every batching policy's traits, which the page reads instead of comparing policy names; each request's
    prompt tokens (`prompt_tokens`, {id: n}; a lesson's fill-ins read them, so a spectator who joins mid-run has them
    from the start; a replay may lack them: its records have them)."""
    return {"run_id": run_id, "lanes": list(lanes), "workload": workload, "model": model, "policies": policy_traits(),
            "prompt_tokens": dict(prompt_tokens or {}), **(resolved if resolved is not None else resolved_of(workload))}


def resolved_of(workload: dict) -> dict:
    """`announced` for a workload as stored (a replay, /api/runs/<id>): parsed again, as it was when it ran."""
    try:
        return announced(parse_workload(workload, CLI_LIMITS))
    except WorkloadError as e:  # a run stored by an older version whose options no longer parse: drawn from its records
        log.warning("a stored workload no longer parses (%s): its lanes replay without their configurations", e)
        return {"lane_configs": {}, "requests": list(workload.get("requests", []))}


def tick_payload(run_id: str, t: int, lanes: dict[str, dict | None]) -> dict:
    """Tick `t` of a run: every lane's step record, serialized (None once that lane is done)."""
    return {"run_id": run_id, "t": t, "lanes": lanes, "sent_at": time.time()}


def finished_payload(run_id: str, metrics: dict, stored: bool = True) -> dict:
    return {"run_id": run_id, "metrics": metrics, "stored": stored}


def as_backlog(event: str, payload: dict) -> dict:
    """An event of a run's log as a late watcher is sent it: its ticks are marked `replay`."""
    return {**payload, "replay": True} if event == Event.TICK else payload


def records_from_log(log: list[tuple[str, dict]], lanes: list[str]) -> dict[str, list[dict]]:
    """{lane: [step record dicts]} from a run's logged ticks."""
    ticks = [payload for event, payload in log if event == Event.TICK]
    return {lane: [tick["lanes"][lane] for tick in ticks if tick["lanes"][lane] is not None] for lane in lanes}


def replay_events(run_id: str, model: str, workload: dict, lanes: list[str], records: dict[str, list[dict]],
                  metrics: dict) -> list[tuple[str, dict]]:
    """(event, payload) pairs that replay a stored run: run_started, every tick (marked `replay`), run_finished."""
    events = [(Event.RUN_STARTED.value, started_payload(run_id, lanes, workload, model))]
    steps = max((len(recs) for recs in records.values()), default=0)
    for t in range(1, steps + 1):
        tick = {lane: records[lane][t - 1] if t <= len(records[lane]) else None for lane in lanes}
        events.append((Event.TICK.value, {"run_id": run_id, "t": t, "lanes": tick, "replay": True}))
    events.append((Event.RUN_FINISHED.value, {"run_id": run_id, "metrics": metrics}))
    return events


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
