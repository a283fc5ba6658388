"""A run as the server sees it: its status, who watches it, the ticks sent so far; and the wire payloads.

The engine's `Run` computes; a `LiveRun` is the server's bookkeeping around it (queue, room,
spectators, backlog for late watchers). `replay_events` turns stored step records back into the very
events a live run sent, so a finished run replays exactly. This module knows the step record and the
event payloads, nothing of threads, sockets or storage.
"""
import secrets
import time
from dataclasses import dataclass, field
from enum import Enum

from engine.workload import Workload


class RunStatus(str, Enum):
    QUEUED = "queued"        # waiting for the engine worker
    RUNNING = "running"      # the worker is stepping its lanes
    FINISHED = "finished"    # every lane is done; metrics computed
    FAILED = "failed"        # an exception ended it
    CANCELLED = "cancelled"  # nobody watched it any more, or the server stopped


class Rejected(Exception):
    """A client request the server refuses; becomes one `run_error` event."""

    def __init__(self, code: str, message: str, field: str | None = None, run_id: str | None = None):
        super().__init__(message)
        self.code, self.message, self.field, self.run_id = code, message, field, run_id

    def payload(self) -> dict:
        return error_payload(self.message, self.field, self.run_id, self.code)


def _shorten(text: str | None, limit: int) -> str | None:
    return text if text is None or len(text) <= limit else text[:limit - 1] + "\u2026"


def error_payload(message: str, field: str | None = None, run_id: str | None = None, code: str = "invalid") -> dict:
    """A `run_error`; message and field are shortened, since a hostile key or value may be echoed in them."""
    return {"message": _shorten(message, 500), "field": _shorten(field, 200), "run_id": run_id, "code": code}


def new_run_id() -> str:
    return secrets.token_urlsafe(9)  # 12 URL-safe characters, 72 random bits


@dataclass(eq=False)
class LiveRun:
    workload: Workload
    lanes: list[str]
    submitter: str | None                        # socket id of the client that submitted it
    run_id: str = field(default_factory=new_run_id)
    status: RunStatus = RunStatus.QUEUED
    watchers: set[str] = field(default_factory=set)   # socket ids in its room (the submitter included)
    orphaned_at: float | None = None             # monotonic time the last watcher left (None: watched)
    cancel_requested: bool = False               # its submitter asked to stop it
    ticks: list[dict] = field(default_factory=list)  # every tick payload sent so far
    metrics: dict | None = None                  # set when finished
    error: str | None = None                     # why it failed or was cancelled
    created: float = field(default_factory=time.time)

    @property
    def is_live(self) -> bool:
        return self.status in (RunStatus.QUEUED, RunStatus.RUNNING)

    def started_payload(self, model: str) -> dict:
        return started_payload(self.run_id, self.lanes, self.workload.to_dict(), model)

    def tick_payload(self, t: int, records: dict) -> dict:
        lanes = {lane: None if rec is None else rec.to_dict() for lane, rec in records.items()}
        return {"run_id": self.run_id, "t": t, "lanes": lanes, "sent_at": time.time()}

    def records(self) -> dict[str, list[dict]]:
        """{lane: [step record dicts]} rebuilt from the ticks sent."""
        return {lane: [tick["lanes"][lane] for tick in self.ticks if tick["lanes"][lane] is not None]
                for lane in self.lanes}


def started_payload(run_id: str, lanes: list[str], workload: dict, model: str) -> dict:
    """`run_started`, live or replayed."""
    return {"run_id": run_id, "lanes": list(lanes), "workload": workload, "model": model}


def replay_events(run_id: str, model: str, workload: dict, lanes: list[str], records: dict[str, list[dict]],
                  metrics: dict) -> list[tuple[str, dict]]:
    """(event, payload) pairs that replay a finished run: run_started, every tick (marked `replay`), run_finished."""
    events = [("run_started", started_payload(run_id, lanes, workload, model))]
    steps = max((len(recs) for recs in records.values()), default=0)
    for t in range(1, steps + 1):
        tick = {lane: records[lane][t - 1] if t <= len(records[lane]) else None for lane in lanes}
        events.append(("tick", {"run_id": run_id, "t": t, "lanes": tick, "replay": True}))
    events.append(("run_finished", {"run_id": run_id, "metrics": metrics}))
    return events
