"""Job kinds as the engine worker's one loop drives them: a run here, a load sweep in app.runs.sweeps.

The loop (app.runs.worker) makes a kind for a job, calls `start()`, and until the kind is `done` checks
whether the job must stop, gives the live lane a step, and calls `step()`; then `finish()`. So a run and a
sweep stop, yield to live traffic and fail the same way. A kind computes through `ctx.offload` and sends
through its `JobContext`: it never sees the worker, the book or the sockets.
This module knows the engine's run API and the event payloads.
"""
import logging
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from engine.report.metrics import run_metrics
from engine.step import tick_ms

from engine.workload.announce import announced

from ..protocol import Event, Send, error_payload, finished_payload, started_payload, tick_payload
from .job import Job

log = logging.getLogger("batch_lanes.worker")


@dataclass(frozen=True)
class JobContext:
    """What a job kind may use while it runs, and nothing else of the worker."""
    engine: object                             # the engine (engine.Engine) the job runs on
    model: str                                 # the model's name, for the started events
    offload: Callable                          # offload(fn, *args): blocking compute (app.asyncmode)
    publish: Callable[[str, dict], None]       # log an event of the job's room and send it
    emit: Callable[[list[Send]], None]         # send, unlogged
    set_progress: Callable[[float], None]      # a sweep's fraction done, for a late watcher
    save: Callable[..., str | None]            # save(run_id, workload, lanes, records, metrics, created=None, model=None) -> error
    finish: Callable[[bool], None]             # the book marks the job finished (its run stored or not)
    pace: float = 0.0                          # the simulator's steps take this many times their simulated ms
    sleep: Callable[[float], None] = time.sleep

    def pace_tick(self, ms: float) -> None:
        """A paced simulator's tick takes `pace` times its simulated `ms` (a run's and a sweep's alike); a model's
        tick has taken its own time already."""
        if self.pace and self.engine.lm is None:
            self.sleep(self.pace * ms / 1000)


class JobSteps(Protocol):
    done: bool

    def start(self) -> None: ...
    def step(self) -> None: ...
    def finish(self) -> None: ...
    def close(self) -> None: ...   # after the job ended, however it ended: end what its run holds (ranks)


class RunSteps:
    """A run: its lanes tick by tick (tick k = step k of every lane), then metrics, the store, `run_finished`."""

    def __init__(self, ctx: JobContext, job: Job):
        self.ctx, self.job, self.run, self.t0 = ctx, job, None, time.perf_counter()
        self.records: dict[str, list[dict]] = {lane: [] for lane in job.lanes}  # each lane's records, serialized
                                                                                 # once: sent in ticks, then stored

    @property
    def done(self) -> bool:
        return self.run.done

    def start(self) -> None:
        job = self.job
        tokens = {spec.id: len(spec.prompt_ids) for spec in job.prepared.requests}
        self.ctx.publish(Event.RUN_STARTED, started_payload(job.run_id, job.lanes, job.prepared.to_dict(), self.ctx.model,
                                                            tokens, announced(job.prepared)))
        self.run = self.ctx.offload(self.ctx.engine.start, job.prepared)

    def step(self) -> None:
        ctx, run = self.ctx, self.run
        records = ctx.offload(run.tick)
        ctx.pace_tick(tick_ms(records))
        lanes = {lane: None if rec is None else rec.to_dict() for lane, rec in records.items()}
        for lane, rec in lanes.items():
            if rec is not None:
                self.records.setdefault(lane, []).append(rec)
        ctx.publish(Event.TICK, tick_payload(self.job.run_id, run.t, lanes))

    def close(self) -> None:
        """A tensor-parallel lane's ranks end with the run: finished, failed (a rank died) or cancelled."""
        if self.run is not None:
            self.run.close()

    def finish(self) -> None:
        ctx, job = self.ctx, self.job
        records = {lane: self.records.get(lane, []) for lane in self.run.records()}
        metrics = run_metrics(records, job.prepared)
        store_error = ctx.save(job.run_id, job.prepared, job.lanes, records, metrics, job.created)
        ctx.publish(Event.RUN_FINISHED, finished_payload(job.run_id, metrics, store_error is None))
        if store_error is not None:
            ctx.emit([Send(Event.RUN_ERROR, error_payload(store_error, "storage", job.run_id, "storage"), job.run_id)])
        ctx.finish(store_error is None)
        log.info("run %s finished: %d ticks in %.0f ms", job.run_id, self.run.t, (time.perf_counter() - self.t0) * 1000)
