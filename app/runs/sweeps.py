"""A load sweep as a job kind of the engine worker's one loop (app.runs.steps).

A sweep (`sweep` event) re-runs one mix at several request rates (engine.report.sweep) on its lanes. It queues like
a run (same queue, positions, one per client, cancel, orphan rules); while it runs it sends `sweep_progress`
(a fraction of the tokens to write, at most 4 times a second, not logged: a late watcher gets the latest) and
one `sweep_point` per rate, whose run is stored like any finished run so that the point opens at
`/runs/<id>`. Sweeps themselves are not stored: the book keeps their log. This module knows the engine's
sweep API and the event payloads; the loop, the book and the emits are the worker's.
"""
import logging
import time
from dataclasses import replace

from engine.report.sweep import SweepTick, iter_sweep

from ..protocol import Event, Send, new_run_id
from .job import Job, simulated, sweep_engine, sweep_started_payload
from .steps import JobContext

log = logging.getLogger("batch_lanes.sweeps")
PROGRESS_EVERY_S = 0.25


def total_tokens(job: Job) -> int:
    """The most tokens a sweep writes: every request's max_new_tokens, on every lane, at every rate."""
    return sum(len(w.lanes) * sum(r.max_new_tokens for r in w.requests) for _, w in job.prepared)


class SweepSteps:
    """A prepared sweep rate by rate; each step is one tick of one rate's run (through `offload`)."""

    def __init__(self, ctx: JobContext, job: Job):
        self.ctx, self.job, self.done = ctx, job, False
        self.steps, self.total, self.written, self.sent, self.points, self.rate = None, 1, 0, 0.0, [], None
        self.counted: dict[str, int] = {}   # lane -> its records whose tokens `written` holds (the current rate's run)
        self.t0 = time.perf_counter()

    def start(self) -> None:
        ctx, job, req = self.ctx, self.job, self.job.request
        ctx.publish(Event.SWEEP_STARTED, sweep_started_payload(job, ctx.model))
        self.steps = iter_sweep(sweep_engine(job, ctx.engine), job.prepared, req.get("slo_ttft_ms"), req.get("slo_tpot_ms"))
        self.total = max(1, total_tokens(job))

    def step(self) -> None:
        ctx, job = self.ctx, self.job
        step = ctx.offload(next, self.steps, None)
        if step is None:
            self.done = True
            return
        ctx.pace_tick(step.ms)   # a paced simulator's sweep takes time as its runs do
        rate, run, point = step.rate, step.run, step.point
        self.rate = rate
        self.written += self.new_tokens(run)
        if point is None:
            if time.monotonic() - self.sent >= PROGRESS_EVERY_S:
                self.sent = time.monotonic()
                ctx.set_progress(self.written / self.total)
                ctx.emit([Send(Event.SWEEP_PROGRESS, {"run_id": job.run_id, "fraction": self.written / self.total,
                                                      "rate": rate}, job.run_id)])
            return
        self.counted = {}   # the next rate's run is a new one
        self.points.append({**point, "point_run_id": self.save_point(step)})
        ctx.set_progress(self.written / self.total)
        ctx.publish(Event.SWEEP_POINT, {"run_id": job.run_id, **self.points[-1], "done": len(self.points),
                                        "total": len(job.prepared)})

    def close(self) -> None:
        """Nothing held past a rate's run: each run's lanes end their own ranks when done (engine/lane.py)."""

    def finish(self) -> None:
        self.ctx.publish(Event.SWEEP_FINISHED, {"run_id": self.job.run_id, "points": self.points})
        self.ctx.finish(False)
        log.info("sweep %s finished: %d rates in %.1f s", self.job.run_id, len(self.points), time.perf_counter() - self.t0)

    def new_tokens(self, run) -> int:
        """Tokens the run's lanes wrote in the records since the last call (read from the records' cells)."""
        n = 0
        for name, recs in run.records().items():
            for record in recs[self.counted.get(name, 0):]:
                n += sum(len(c.tokens) if c.tokens else c.token_id is not None for c in record.slots)
            self.counted[name] = len(recs)
        return n

    def save_point(self, step: SweepTick) -> str | None:
        """Store one rate's run so that its point opens at /runs/<id>; None (logged) if the store failed it. Its
        description says what the point is: the preset's lesson speaks of the preset's own arrivals, not these.
        The records and metrics are the point's own (serialized and computed once, engine.report.sweep)."""
        run_id = new_run_id()
        sim = simulated(self.job) or self.ctx.engine.simulated
        workload = replace(step.run.workload, description=point_description(step.run.workload, self.rate, sim))
        error = self.ctx.save(run_id, workload, workload.lane_names, step.records, step.metrics,
                              model="simulator" if sim else None)
        return None if error is not None else run_id


def point_description(workload, rate: float, sim: bool) -> str:
    """A sweep point's lesson, true of the point: how many requests, at what rate, and whether it was simulated."""
    n = len(workload.requests)
    text = (f"One point of a load sweep of {workload.name}: {n} request{'s' if n != 1 else ''} arriving at "
            f"{rate:g} per second (drawn at random, so the real spacing varies), on {', '.join(workload.lane_names)}. "
            f"Compare its TTFT and throughput with the other rates on the sweep page.")
    return f"SIMULATED (no model ran; step times from the cost model). {text}" if sim else text
