"""A load sweep as the server sees it, and how the engine worker runs one.

A sweep (`sweep` event) re-runs one mix at several request rates (engine.sweep) on its lanes. It queues
like a run (same queue, positions, one per client, cancel, orphan rules); while it runs the worker sends
`sweep_progress` (a fraction of the tokens to write, at most 4 times a second) and one `sweep_point` per
rate, whose run is stored like any finished run so that the point opens at `/runs/<id>`. This module
knows the engine's sweep API and the event payloads; the worker owns locks, the queue and emits.
"""
import logging
import time
from dataclasses import dataclass, field

from engine.metrics import run_metrics
from engine.sweep import iter_sweep

from .runs import RunStatus, new_run_id
from .store import StoreError

log = logging.getLogger("batch_lanes.sweeps")
PROGRESS_EVERY_S = 0.25


@dataclass(eq=False)
class LiveSweep:
    prepared: list                     # (rate, prepared Workload) for every rate, lowest first
    workload: dict                     # the mix as submitted (requests or a generate section)
    submitter: str | None
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    burstiness: float | None = None
    run_id: str = field(default_factory=new_run_id)
    status: RunStatus = RunStatus.QUEUED
    watchers: set[str] = field(default_factory=set)
    orphaned_at: float | None = None
    cancel_requested: bool = False     # its submitter asked to stop it
    points: list[dict] = field(default_factory=list)
    progress: float = 0.0
    error: str | None = None
    ticks: list = field(default_factory=list)  # a sweep streams no ticks (kept for the queue's bookkeeping)
    created: float = field(default_factory=time.time)

    @property
    def is_live(self) -> bool:
        return self.status in (RunStatus.QUEUED, RunStatus.RUNNING)

    @property
    def rates(self) -> list[float]:
        return [rate for rate, _ in self.prepared]

    @property
    def lanes(self) -> list[str]:
        return self.prepared[0][1].lane_names

    def started_payload(self, model: str) -> dict:
        return {"run_id": self.run_id, "rates": self.rates, "lanes": self.lanes,
                "lane_configs": self.prepared[0][1].to_dict()["lanes"], "workload": self.workload, "model": model,
                "slo_ttft_ms": self.slo_ttft_ms, "slo_tpot_ms": self.slo_tpot_ms, "burstiness": self.burstiness}

    def total_tokens(self) -> int:
        """The most tokens the sweep writes: every request's max_new_tokens, on every lane, at every rate."""
        return sum(len(w.lanes) * sum(r.max_new_tokens for r in w.requests) for _, w in self.prepared)

    def replay_events(self, model: str) -> list[tuple[str, dict]]:
        """What a watcher joining now is sent: the start, every point so far, the progress, and the end if done."""
        events = [("sweep_started", self.started_payload(model))]
        events += [("sweep_point", self.point_payload(p, i + 1)) for i, p in enumerate(self.points)]
        if self.status is RunStatus.FINISHED:
            events.append(("sweep_finished", {"run_id": self.run_id, "points": self.points}))
        else:
            events.append(("sweep_progress", {"run_id": self.run_id, "fraction": self.progress}))
        return events

    def point_payload(self, point: dict, done: int) -> dict:
        return {"run_id": self.run_id, **point, "done": done, "total": len(self.prepared)}


def execute_sweep(worker, sweep: LiveSweep) -> None:
    """Run a sweep rate by rate and tick by tick (each tick off the eventlet hub), checking between ticks whether
    it must stop (cancelled, orphaned, the server stopping). Called by the worker's loop (lock not held)."""
    steps = iter_sweep(worker.engine, sweep.prepared, sweep.slo_ttft_ms, sweep.slo_tpot_ms)
    total, written, sent = max(1, sweep.total_tokens()), 0, 0.0
    t0 = time.perf_counter()
    try:
        while True:
            with worker.lock:
                reason = worker.stop_reason(sweep)
                if reason:
                    worker.end(sweep, RunStatus.CANCELLED, reason)
                    return
            step = worker.offload(next, steps, None)
            if step is None:
                break
            rate, run, point = step
            now_written = written + sum(len(r.output_ids) for lane in run.lanes.values()
                                        for r in lane.scheduler.requests)
            if point is None:
                if time.monotonic() - sent >= PROGRESS_EVERY_S:
                    sent = time.monotonic()
                    with worker.lock:
                        sweep.progress = now_written / total
                        worker.emit("sweep_progress", {"run_id": sweep.run_id, "fraction": sweep.progress, "rate": rate},
                                    to=sweep.run_id)
                continue
            written = now_written
            point = {**point, "point_run_id": save_point(worker, run)}
            with worker.lock:
                sweep.points.append(point)
                sweep.progress = written / total
                worker.emit("sweep_point", sweep.point_payload(point, len(sweep.points)), to=sweep.run_id)
    except Exception as e:  # one broken sweep must not stop the worker
        log.exception("sweep %s failed after %d points", sweep.run_id, len(sweep.points))
        with worker.lock:
            worker.end(sweep, RunStatus.FAILED, f"the engine failed during this sweep: {type(e).__name__}: {e}")
        return
    with worker.lock:
        sweep.progress = 1.0
        worker.emit("sweep_finished", {"run_id": sweep.run_id, "points": sweep.points}, to=sweep.run_id)
        worker.retire(sweep, RunStatus.FINISHED)
    log.info("sweep %s finished: %d rates in %.1f s", sweep.run_id, len(sweep.points), time.perf_counter() - t0)


def save_point(worker, run) -> str | None:
    """Store one rate's run so that its point opens at /runs/<id>; None (logged) if the store failed it."""
    run_id = new_run_id()
    records = {name: [r.to_dict() for r in recs] for name, recs in run.records().items()}
    try:
        worker.offload(worker.store.save, run_id, worker.status["model"], run.workload.to_dict(),
                       run.workload.lane_names, records, run_metrics(records, run.workload))
    except StoreError as e:
        log.error("%s", e)
        return None
    return run_id
