"""The run book's interface: the queue and its positions, who watches which run, every run's event log, and
the runs nobody watches, as the web handlers (app.runs.service) and the engine worker (app.runs.worker) ask it.

A book returns what to send (`protocol.Send`) instead of sending it, so its rules are plain functions of its
state; the caller delivers. Every event of a run's room is logged with its `seq` before it is returned, which
is what lets `app.runs.fanout` give a late watcher the backlog and then the live events with nothing twice.
Two books keep it: `app.runs.memory_book.MemoryBook` (one process) and `app.runs.redis_book.RedisBook` (every
process of a deployment, in Redis). This module knows jobs and payloads, nothing of sockets, Redis or the engine.
"""
from typing import Protocol

from ..protocol import Event, Rejected, RunStatus, Send, as_backlog
from .job import STUDENT, TEACHER, Job


class Book(Protocol):
    # -- the model ---------------------------------------------------------------------------------
    def model_status(self) -> dict: ...
    def set_model_status(self, status: dict) -> None: ...

    # -- asked by web handlers ---------------------------------------------------------------------
    def submit(self, job: Job) -> list[Send]:
        """Queue `job` (its submitter already in its room); `Rejected` if its client has a live job or the queue is full."""
    def watch(self, sid: str, run_id: str) -> list[Send] | None:
        """What `sid` (already in the room) is sent to join `run_id`: its position, or its log so far. None if the
        book does not hold the run (the store may); `Rejected` if it did not finish."""
    def cancel(self, sid: str, run_id: str, class_code: str | None = None) -> list[Send]:
        """`sid` cancels its own queued or running job, or (`class_code`, its teacher checked by the caller) a
        student's job of that class; `Rejected` if there is no such live job."""
    def pause(self, run_id: str, class_code: str, paused: bool) -> None:
        """A class's teacher (checked by the caller) pauses or resumes a running job of the class, its own or a
        student's; `Rejected` if there is no such running job."""
    def forget(self, sid: str) -> list[Send]:
        """`sid` disconnected: it watches nothing any more."""
    def queue_length(self) -> int: ...
    def queued_jobs(self) -> list[Job]:
        """The queued jobs, next first (a class's teacher reads its students' from them)."""
    def running_jobs(self) -> list[Job]:
        """The jobs engine workers are executing now (a class's teacher may stop its students')."""
    def knows(self, run_id: str) -> bool:
        """Whether the book holds a run (not a sweep) a page can show."""
    def finished_log(self, run_id: str) -> tuple[Job, list[tuple[str, dict]]] | None:
        """A finished run's job and log, while the book keeps it (its store failed it)."""

    # -- asked by the engine worker ------------------------------------------------------------------
    def take(self, timeout: float) -> tuple[Job | None, list[Send]]:
        """The next queued job, now running (None after about `timeout` s with none), and the new queue positions."""
    def wake(self) -> None:
        """Something for the engine worker to do now (a live request, a stop): end a `take` that waits."""
    def publish(self, job: Job, event: str, payload: dict) -> Send | None:
        """Log an event of `job`'s room and return it numbered with its `seq` (None: logged later, then delivered
        from the log; only a book whose store may be away does that)."""
    def set_progress(self, job: Job, fraction: float) -> None: ...
    def stop_reason(self, job: Job) -> str | None:
        """Why a running job must stop now (its submitter cancelled it, nobody watched it), or None."""
    def paused_since(self, job: Job) -> float | None:
        """When (time.time()) its class's teacher paused `job`, or None: it runs."""
    def housekeeping(self) -> list[Send]:
        """Cancel queued jobs nobody watched for the grace period (and, in Redis, end dead workers' runs)."""
    def end(self, job: Job, status: RunStatus, reason: str) -> list[Send]:
        """End a job that did not finish: tell its room why."""
    def finish(self, job: Job, stored: bool) -> None:
        """Mark `job` finished; its log is dropped when the store has it (else it is what replays the run)."""


def may_cancel(job: Job, sid: str, class_code: str | None) -> bool:
    """Whether a cancel may stop `job`: its submitter's own, or a class's teacher's of a student run of that class."""
    if class_code is not None:
        return job.class_code == class_code and job.role == STUDENT
    return job.sid == sid


PAUSE_CAP_S = 120.0   # a paused run goes on by itself after this long: nothing waits on a teacher who forgot it
NEXT_RUN = "the teacher started another run while this one was paused"


def check_pause(job: Job | None, status: RunStatus | None, class_code: str) -> None:
    """A class's teacher may pause a running job of that class (its own, a student's): else `Rejected`."""
    if not job or status is not RunStatus.RUNNING or job.class_code != class_code:
        raise Rejected("not_found", "the class has no running run to pause or resume", field="run_id")


def teacher_waits(job: Job, queued: list[Job]) -> bool:
    """Whether a run of `job`'s class by its teacher waits in the queue (it ends a paused `job`: NEXT_RUN)."""
    return job.class_code is not None and any(q.class_code == job.class_code and q.role == TEACHER for q in queued)


def cancel_reason(class_code: str | None) -> str:
    """What a cancelled job's room is told: who stopped it."""
    return "cancelled by the teacher" if class_code is not None else "cancelled by its submitter"


def backlog(log: list[tuple[str, dict]], sid: str, job: Job, status: RunStatus, progress: float) -> list[Send]:
    """A running or finished job's log as local sends to `sid` (ticks marked `replay`); a live sweep adds its progress."""
    sends = [Send(event, as_backlog(event, payload), sid, local=True) for event, payload in log]
    if job.kind == "sweep" and status is RunStatus.RUNNING:
        sends.append(Send(Event.SWEEP_PROGRESS, {"run_id": job.run_id, "fraction": progress}, sid, local=True))
    return sends
