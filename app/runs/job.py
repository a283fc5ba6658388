"""A job: one run or one load sweep a client asked for, as it waits in the queue and travels to an engine worker.

A job carries the client's request as checked JSON, so that it crosses a process boundary (Redis) whole;
an engine worker turns it into engine workloads (`prepare_job`). When web process and engine share a process,
the handler prepares it at once (`prepared`) from the workload it already checked (parsed once), so a prompt
over the token limits is refused before it queues.
This module knows the request shapes, nothing of sockets, Redis or storage.
"""
import time
from dataclasses import dataclass, field

from ..protocol import new_run_id

RUN, SWEEP = "run", "sweep"
MODEL, SIM = "model", "sim"   # a sweep's backend: this server's engine, or the step-clock simulator beside it
BACKENDS = (MODEL, SIM)
TEACHER, STUDENT = "teacher", "student"   # a job's role in its class


@dataclass(eq=False)
class Job:
    kind: str                         # RUN or SWEEP
    request: dict                     # RUN: {"workload", "lanes"}; SWEEP: {"workload", "rates", "lanes", "slo_ttft_ms", ...}
    sid: str | None                   # the submitter's socket id (its cancel right; None: submitted by no socket)
    lanes: list[str]                  # the lane names it runs, for the page and the store
    run_id: str = field(default_factory=new_run_id)
    created: float = field(default_factory=time.time)  # wall-clock seconds it was submitted
    prepared: object = None           # RUN: a prepared Workload; SWEEP: [(rate, Workload)] (None: not yet)
    class_code: str | None = None     # the class it was submitted in (app.runs.classes), None: no class
    role: str | None = None           # TEACHER or STUDENT within that class (None: no class)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "request": self.request, "sid": self.sid, "lanes": self.lanes,
                "run_id": self.run_id, "created": self.created, "class_code": self.class_code, "role": self.role}

    @classmethod
    def from_dict(cls, d: dict) -> "Job":
        return cls(d["kind"], d["request"], d["sid"], d["lanes"], d["run_id"], d["created"],
                   class_code=d.get("class_code"), role=d.get("role"))


def prepare_job(job: Job, engine, limits, workload=None) -> None:
    """Tokenize and check `job` for `engine` (raises WorkloadError naming the field): sets `job.prepared`.
    `workload`: a run's request already parsed by the handler (engine.workload.workload.Workload), not parsed again."""
    from engine.report.sweep import prepare_sweep
    from engine.workload.workload import parse_workload

    req = job.request
    if job.kind == RUN:
        if workload is None:               # taken from the queue: parsed here, where the engine is
            workload = parse_workload(req["workload"], limits, lanes=req.get("lanes"))
        job.prepared = engine.prepare(workload)
    else:
        job.prepared = prepare_sweep(sweep_engine(job, engine), req["workload"], req["rates"], limits, req.get("lanes"),
                                     req.get("burstiness"))


def simulated(job: Job) -> bool:
    """Whether a sweep asked for the simulator (`backend: "sim"`) rather than the server's engine."""
    return job.kind == SWEEP and job.request.get("backend") == SIM


def sweep_engine(job: Job, engine):
    """The engine a sweep runs on: the server's, or a simulator (engine.Engine(None)) under the same limits. A
    simulated sweep's prompt tokens are the simulator's estimate and its step times its cost model's."""
    if not simulated(job):
        return engine
    from engine import Engine
    return Engine(None, engine.limits)


def sweep_started_payload(job: Job, model: str) -> dict:
    """`sweep_started`: the rates, the lanes and their configurations, the mix, the SLOs and whether it is
    simulated (then `model` is "simulator")."""
    req = job.request
    sim = simulated(job) or model == "simulator"
    return {"run_id": job.run_id, "rates": [rate for rate, _ in job.prepared], "lanes": job.lanes,
            "lane_configs": job.prepared[0][1].to_dict()["lanes"], "workload": req["workload"],
            "model": "simulator" if sim else model, "simulated": sim,
            "slo_ttft_ms": req.get("slo_ttft_ms"), "slo_tpot_ms": req.get("slo_tpot_ms"),
            "burstiness": req.get("burstiness")}
