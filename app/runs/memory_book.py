"""The run book of one process (app.runs.book.Book): the queue and its positions, who watches which run,
every run's event log (the backlog a late watcher gets), how long ended runs are kept, and runs nobody watches.

`app.runs.redis_book.RedisBook` keeps the same book in Redis for several processes. One lock guards
everything; no method blocks on anything but it. This module knows jobs and payloads, nothing of sockets or
the engine.
"""
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from ..protocol import Event, Rejected, RunStatus, Send, ended_payload
from .book import backlog, cancel_reason, check_pause, may_cancel
from .job import Job
from .queue_order import check_class_cap, insert_index, position_payload


@dataclass(eq=False)
class Entry:
    job: Job
    status: RunStatus = RunStatus.QUEUED
    watchers: set[str] = field(default_factory=set)   # socket ids in its room (the submitter included)
    orphaned_at: float | None = None   # monotonic time the last watcher left (None: watched)
    cancel_requested: str | None = None  # why it must stop: its submitter (or its class's teacher) asked
    paused_at: float | None = None     # when (time.time()) its class's teacher paused it; None: it runs
    log: list[tuple[str, dict]] = field(default_factory=list)  # every event sent to its room, seq = index + 1
    progress: float = 0.0              # a sweep's fraction done (sweep_progress is not logged)
    error: str | None = None           # why it failed or was cancelled


class MemoryBook:
    def __init__(self, max_queued: int, grace_s: float, recent_runs: int, class_cap: int = 8):
        self.max_queued, self.grace_s, self.recent_runs = max_queued, grace_s, recent_runs
        self.class_cap = class_cap            # queued student runs one class may hold (app.runs.queue_order)
        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)
        self.queue: deque[Entry] = deque()   # waiting jobs, next first
        self.runs: dict[str, Entry] = {}     # live jobs and the latest ended ones, oldest first
        self.active: dict[str, str] = {}     # submitter socket id -> its queued or running job's id
        self.model: dict = {}                # the model status the engine worker last set

    # -- the model ----------------------------------------------------------------------------------
    def model_status(self) -> dict:
        return self.model

    def set_model_status(self, status: dict) -> None:
        self.model = dict(status)            # replaced whole, so readers never see half an update

    # -- asked by web handlers ---------------------------------------------------------------------
    def submit(self, job: Job) -> list[Send]:
        """Queue `job` (its submitter already in its room); `Rejected` if its client has a live job or the queue is full."""
        with self.wakeup:
            if job.sid in self.active:
                run_id = self.active[job.sid]
                raise Rejected("active_run", f"you already have a run in progress ({run_id}): one run per client at "
                               f"a time", run_id=run_id)
            if len(self.queue) >= self.max_queued:
                raise Rejected("busy", f"the server is busy: {len(self.queue)} runs are waiting, the limit is "
                               f"{self.max_queued}; try again in a minute")
            check_class_cap(self.queued_jobs(), job, self.class_cap)
            entry = Entry(job, watchers={job.sid} if job.sid else set())
            self.runs[job.run_id] = entry
            if job.sid:
                self.active[job.sid] = job.run_id
            at = insert_index(self.queued_jobs(), job)   # the end, or before its class's students (a teacher's)
            self.queue.insert(at, entry)
            self.wakeup.notify()
            if at < len(self.queue) - 1:                  # the runs behind it moved back
                return self._positions()
            return [Send(Event.RUN_QUEUED, position_payload(self.queued_jobs(), at), job.sid)]

    def watch(self, sid: str, run_id: str) -> list[Send] | None:
        """What `sid` (already in the room) is sent to join `run_id`: its position, or its log so far (local sends
        with their `seq`). None if the book does not hold the run (the store may); `Rejected` if it did not finish."""
        with self.lock:
            entry = self.runs.get(run_id)
            if entry is None or (entry.status is RunStatus.FINISHED and not entry.log):
                return None
            if entry.status in (RunStatus.FAILED, RunStatus.CANCELLED):
                raise Rejected(entry.status.value, f"run {run_id} was {entry.status.value}: {entry.error}", run_id=run_id)
            if entry.status.is_live:
                entry.watchers.add(sid)
                entry.orphaned_at = None
            if entry.status is RunStatus.QUEUED:
                return [Send(Event.RUN_QUEUED, position_payload(self.queued_jobs(), self.queue.index(entry)), sid,
                             local=True)]
            return backlog(entry.log, sid, entry.job, entry.status, entry.progress)

    def cancel(self, sid: str, run_id: str, class_code: str | None = None) -> list[Send]:
        """`sid` cancels its own queued or running job, or (`class_code`: the teacher of that class, checked by the
        caller) a student's job of that class; `Rejected` if there is no such live job."""
        with self.wakeup:
            entry = self.runs.get(run_id)
            if entry is None or not entry.status.is_live or not may_cancel(entry.job, sid, class_code):
                raise Rejected("not_found", f"you have no queued or running run {run_id!r} to cancel", field="run_id",
                               run_id=run_id)
            entry.cancel_requested = cancel_reason(class_code)   # a running job stops before its next tick
            self.wakeup.notify()
            if entry.status is not RunStatus.QUEUED:
                return []
            self.queue.remove(entry)
            return self._end(entry, RunStatus.CANCELLED, entry.cancel_requested) + self._positions()

    def pause(self, run_id: str, class_code: str, paused: bool) -> None:
        """A class's teacher (checked by the caller) pauses or resumes a running job of the class."""
        with self.wakeup:
            entry = self.runs.get(run_id)
            check_pause(entry and entry.job, entry and entry.status, class_code)
            entry.paused_at = (entry.paused_at or time.time()) if paused else None

    def paused_since(self, job: Job) -> float | None:
        with self.lock:
            return self.runs[job.run_id].paused_at

    def forget(self, sid: str) -> list[Send]:
        """`sid` disconnected: it watches nothing any more; a job nobody watches starts its grace period."""
        with self.wakeup:
            self.active.pop(sid, None)
            for entry in self.runs.values():
                if entry.status.is_live and sid in entry.watchers:
                    entry.watchers.discard(sid)
                    if not entry.watchers:
                        entry.orphaned_at = time.monotonic()
            self.wakeup.notify()
            return self._prune_orphans()

    def queue_length(self) -> int:
        return len(self.queue)

    def queued_jobs(self) -> list[Job]:
        """The queued jobs, next first."""
        return [entry.job for entry in self.queue]

    def running_jobs(self) -> list[Job]:
        """The jobs an engine worker is executing now."""
        with self.lock:
            return [entry.job for entry in self.runs.values() if entry.status is RunStatus.RUNNING]

    def knows(self, run_id: str) -> bool:
        """Whether the book holds a run (not a sweep) a page can show."""
        entry = self.runs.get(run_id)
        return entry is not None and entry.job.kind == "run"

    def finished_log(self, run_id: str) -> tuple[Job, list[tuple[str, dict]]] | None:
        """A finished run's job and log, while the book keeps it (its store failed it)."""
        with self.lock:
            entry = self.runs.get(run_id)
            if entry is None or entry.status is not RunStatus.FINISHED or not entry.log:
                return None
            return entry.job, list(entry.log)

    # -- asked by the engine worker ------------------------------------------------------------------
    def take(self, timeout: float) -> tuple[Job | None, list[Send]]:
        """The next queued job, now running (None after `timeout` s with none), and the new queue positions."""
        with self.wakeup:
            sends = self._prune_orphans()
            if not self.queue:
                self.wakeup.wait(timeout)    # woken by submit, cancel, forget and stop
                sends += self._prune_orphans()
            if not self.queue:
                return None, sends
            entry = self.queue.popleft()
            entry.status = RunStatus.RUNNING
            return entry.job, sends + self._positions()

    def wake(self) -> None:
        with self.wakeup:
            self.wakeup.notify_all()

    def publish(self, job: Job, event: str, payload: dict) -> Send:
        """Log an event of `job`'s room and return it numbered with its `seq`."""
        with self.lock:
            log = self.runs[job.run_id].log
            payload = {**payload, "seq": len(log) + 1}
            log.append((str(event), payload))
            return Send(event, payload, job.run_id)

    def set_progress(self, job: Job, fraction: float) -> None:
        with self.lock:
            self.runs[job.run_id].progress = fraction

    def stop_reason(self, job: Job) -> str | None:
        """Why a running job must stop now (its submitter cancelled it, nobody watched it), or None."""
        with self.lock:
            entry = self.runs[job.run_id]
            if entry.cancel_requested:
                return entry.cancel_requested
            if self._orphaned(entry):
                return "its submitter left and nobody watched it"
            return None

    def housekeeping(self) -> list[Send]:
        """Cancel queued jobs nobody has watched for the grace period."""
        with self.lock:
            return self._prune_orphans()

    def end(self, job: Job, status: RunStatus, reason: str) -> list[Send]:
        """End a job that did not finish: tell its room why."""
        with self.lock:
            return self._end(self.runs[job.run_id], status, reason)

    def finish(self, job: Job, stored: bool) -> None:
        """Mark `job` finished; its log is dropped when the store has it (else it is what replays the run)."""
        with self.lock:
            entry = self.runs[job.run_id]
            self._retire(entry, RunStatus.FINISHED)
            if stored:
                entry.log = []

    # -- rules (lock held) ---------------------------------------------------------------------------
    def _orphaned(self, entry: Entry) -> bool:
        return entry.orphaned_at is not None and time.monotonic() - entry.orphaned_at >= self.grace_s

    def _prune_orphans(self) -> list[Send]:
        gone = [entry for entry in self.queue if self._orphaned(entry)]
        sends = []
        for entry in gone:
            self.queue.remove(entry)
            sends += self._end(entry, RunStatus.CANCELLED, "its submitter left and nobody watched it")
        return sends + (self._positions() if gone else [])

    def _positions(self) -> list[Send]:
        queued = self.queued_jobs()
        return [Send(Event.RUN_QUEUED, position_payload(queued, i), job.run_id) for i, job in enumerate(queued)]

    def _end(self, entry: Entry, status: RunStatus, reason: str) -> list[Send]:
        entry.error = reason
        payload = {**ended_payload(entry.job.run_id, status, reason), "seq": len(entry.log) + 1}
        self._retire(entry, status)
        entry.log = []                   # nobody can replay a run that did not finish
        return [Send(Event.RUN_ERROR, payload, entry.job.run_id)]

    def _retire(self, entry: Entry, status: RunStatus) -> None:
        """Mark a job ended and free its client's slot; keep only the latest ended jobs."""
        entry.status = status
        sid = entry.job.sid
        if sid is not None and self.active.get(sid) == entry.job.run_id:
            del self.active[sid]
        ended = [run_id for run_id, e in self.runs.items() if not e.status.is_live]
        for run_id in ended[:max(0, len(ended) - self.recent_runs)]:
            del self.runs[run_id]

