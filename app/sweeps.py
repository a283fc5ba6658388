"""How the engine worker runs a load sweep job.

A sweep (`sweep` event) re-runs one mix at several request rates (engine.sweep) on its lanes. It queues like
a run (same queue, positions, one per client, cancel, orphan rules); while it runs the worker sends
`sweep_progress` (a fraction of the tokens to write, at most 4 times a second, not logged: a late watcher gets
the latest) and one `sweep_point` per rate, whose run is stored like any finished run so that the point opens
at `/runs/<id>`. Sweeps themselves are not stored: the book keeps their log. This module knows the engine's
sweep API and the event payloads; the worker owns the loop, the book and the emits.
"""
import logging
import time

from engine.metrics import run_metrics
from engine.sweep import iter_sweep

from .job import Job, sweep_started_payload
from .protocol import Event, RunStatus, Send, new_run_id

log = logging.getLogger("batch_lanes.sweeps")
PROGRESS_EVERY_S = 0.25


def total_tokens(job: Job) -> int:
    """The most tokens a sweep writes: every request's max_new_tokens, on every lane, at every rate."""
    return sum(len(w.lanes) * sum(r.max_new_tokens for r in w.requests) for _, w in job.prepared)


def run_sweep(worker, job: Job) -> None:
    """Run a prepared sweep rate by rate and tick by tick (each tick through `offload`), checking between ticks
    whether it must stop. Exceptions end it in the worker's `_execute`."""
    worker.publish(job, Event.SWEEP_STARTED, sweep_started_payload(job, worker.status["model"]))
    req = job.request
    steps = iter_sweep(worker.engine, job.prepared, req.get("slo_ttft_ms"), req.get("slo_tpot_ms"))
    total, written, sent, points = max(1, total_tokens(job)), 0, 0.0, []
    t0 = time.perf_counter()
    while True:
        reason = worker.stop_reason(job)
        if reason:
            worker.emit(worker.book.end(job, RunStatus.CANCELLED, reason))
            return
        worker.step_live()
        step = worker.offload(next, steps, None)
        if step is None:
            break
        rate, run, point = step
        now_written = written + sum(len(r.output_ids) for lane in run.lanes.values() for r in lane.scheduler.requests)
        if point is None:
            if time.monotonic() - sent >= PROGRESS_EVERY_S:
                sent = time.monotonic()
                worker.book.set_progress(job, now_written / total)
                worker.emit([Send(Event.SWEEP_PROGRESS, {"run_id": job.run_id, "fraction": now_written / total,
                                                         "rate": rate}, job.run_id)])
            continue
        written = now_written
        points.append({**point, "point_run_id": save_point(worker, run)})
        worker.book.set_progress(job, written / total)
        worker.publish(job, Event.SWEEP_POINT, {"run_id": job.run_id, **points[-1], "done": len(points),
                                                "total": len(job.prepared)})
    worker.publish(job, Event.SWEEP_FINISHED, {"run_id": job.run_id, "points": points})
    worker.book.finish(job, stored=False)
    log.info("sweep %s finished: %d rates in %.1f s", job.run_id, len(points), time.perf_counter() - t0)


def save_point(worker, run) -> str | None:
    """Store one rate's run so that its point opens at /runs/<id>; None (logged) if the store failed it."""
    records = {name: [r.to_dict() for r in recs] for name, recs in run.records().items()}
    run_id = new_run_id()
    error = worker.save(run_id, run.workload, run.workload.lane_names, records, run_metrics(records, run.workload))
    return None if error is not None else run_id
