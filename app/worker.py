"""The engine worker's loop: load the model, take a job from the run book, tick it, emit, store. Nothing else.

It owns one model on one device. In a single process it runs as the server's background task and emits
through the server; as `python -m app.engine_worker` it emits through Redis (app.engine_worker). Either way
the run book decides (queue, watchers, who must stop) and numbers every event; this loop only computes and
hands the book's answers to `emit`. Forward passes go through `offload` (eventlet's thread pool when the
server runs on eventlet). An exception inside a job ends that job with `run_error`; the loop takes the next.
This module knows the engine's public API and the book's, nothing of HTTP, sockets or Redis.
"""
import logging
import threading
import time
from pathlib import Path
from typing import Callable

from engine import Engine
from engine.metrics import run_metrics
from engine.model import DEFAULT_GGUF
from engine.workload import WorkloadError

from .job import RUN, Job, prepare_job
from .loader import ModelLoad
from .protocol import Event, Rejected, RunStatus, Send, error_payload, finished_payload, started_payload, tick_payload
from .store import StoreError
from .sweeps import run_sweep

log = logging.getLogger("batch_lanes.worker")


def make_offload(async_mode: str):
    """How blocking compute is called: through eventlet's thread pool, or directly on this thread."""
    if async_mode == "eventlet":
        from eventlet import tpool
        return tpool.execute
    return lambda fn, *args, **kwargs: fn(*args, **kwargs)


def initial_status(config: dict, engine: Engine | None) -> dict:
    lm = engine.lm if engine is not None else None
    return {"ready": engine is not None, "progress": 1.0 if engine is not None else 0.0, "error": None,
            "message": "ready" if engine is not None else "loading the model",
            "model": "simulator" if engine is not None and lm is None else
            lm.name if lm is not None else Path(config["MODEL"] or DEFAULT_GGUF).name,
            "device": "none" if engine is not None and lm is None else str(lm.device) if lm is not None else ""}


class EngineWorker:
    def __init__(self, book, emit: Callable[[list], None], store, config: dict, engine: Engine | None = None,
                 start_task: Callable = None, sleep: Callable[[float], None] = time.sleep):
        self.book, self.emit, self.store = book, emit, store
        self.limits = config["LIMITS"]
        self.model_args = (config["MODEL"], config["DTYPE"], config["DEVICE"])
        self.offload = make_offload(config["ASYNC_MODE"])
        self.start_task = start_task or (lambda fn: _thread(fn))
        self.sleep = sleep
        self.pace = config.get("PACE", 0.0)        # the simulator's steps take this many times their simulated ms
        self.engine = engine
        if engine is not None:
            engine.limits = self.limits           # the app's limits are the only limits
        self.status = initial_status(config, engine)
        book.set_model_status(self.status)
        self.live_slots = config.get("LIVE_SLOTS", 0)   # the live lane's slots (0: no live lane, as on a worker process)
        self.live = None                          # the live lane (engine.live), made on the first API request
        self.on_live_step: Callable | None = None  # what a live step sends (app.live.LiveGateway.after_step)
        self._live_lock = threading.Lock()
        self._stopping = threading.Event()
        self._task = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = self.start_task(self._serve)

    def stop(self, timeout: float = 30) -> None:
        """Stop taking jobs, cancel the running one at its next tick, and wait for the loop to end."""
        self._stopping.set()
        wakeup = getattr(self.book, "wakeup", None)
        if wakeup is not None:
            with wakeup:
                wakeup.notify_all()
        join = getattr(self._task, "join", None)  # a Thread; a green thread just ends
        if join is not None:
            join(timeout)

    @property
    def ready(self) -> bool:
        return self.status["ready"]

    def _set_status(self, **changes) -> None:
        self.status = {**self.status, **changes}
        self.book.set_model_status(self.status)
        try:
            self.emit([Send(Event.MODEL_STATUS, self.book.model_status())])
        except Rejected as r:  # the shared book is unreachable: the next status (or the heartbeat) tells
            log.warning("model status not sent: %s", r.message)

    def wake(self) -> None:
        """Something for the loop to do now (a live request): stop waiting for a job."""
        wakeup = getattr(self.book, "wakeup", None)
        if wakeup is not None:
            with wakeup:
                wakeup.notify_all()

    def ensure_live(self):
        """The live lane, made once the model is ready (None before, or where this worker has none)."""
        with self._live_lock:
            if self.live is None and self.ready and self.live_slots:
                from engine.live import LiveLane
                self.live = LiveLane(self.engine, slots=self.live_slots)
            return self.live

    def step_live(self) -> None:
        """One step of the live lane if it has work: between two page ticks, so neither kind of work starves."""
        if self.live is None or not self.live.has_work():
            return
        try:
            record = self.offload(self.live.step)
        except Exception as e:  # a broken live step must not stop the worker: its requests end with an error
            log.exception("live step failed")
            self.live.failure = f"the engine failed during a live step: {type(e).__name__}: {e}"
            self.live.abort()
            record = None
        self.live.notify()                        # on this thread: the streams' queues are the server's
        self.live.failure = None
        if record is not None and self.on_live_step is not None:
            self.emit(self.on_live_step(record))

    def _serve(self) -> None:
        if self.engine is None and not self._load_model():
            return
        while not self._stopping.is_set():
            try:
                self.step_live()
                busy = self.live is not None and self.live.has_work()
                job, sends = self.book.take(timeout=0 if busy else 0.5)
                self.emit(sends + self.book.housekeeping())
            except Exception as e:  # a shared book (Redis) unreachable: say so, keep trying until it is back
                log.warning("run queue unreachable, retrying in 1 s: %s: %s", type(e).__name__, e)
                self.sleep(1.0)
                continue
            if job is not None and not self._stopping.is_set():
                self._execute(job)
            elif job is not None:
                self.emit(self.book.end(job, RunStatus.CANCELLED, "the server is stopping"))

    def _load_model(self) -> bool:
        load, t0, sent = ModelLoad(*self.model_args, self.limits.max_slots), time.perf_counter(), None
        load.start(lambda fn: self.start_task(lambda: self.offload(fn)))
        while not load.done and not self._stopping.is_set():
            if load.progress != sent:  # publish progress from this thread, as it changes
                sent = load.progress
                self._set_status(progress=sent[0], message=sent[1])
            self.sleep(0.1)
        if load.lm is not None:
            self.engine = Engine(load.lm, self.limits)
            self._set_status(ready=True, progress=1.0, message="ready", model=load.lm.name, device=str(load.lm.device))
            log.info("model %s ready on %s after %.1f s", load.lm.name, load.lm.device, time.perf_counter() - t0)
        elif load.error is not None:
            self._set_status(error=load.error, message="the model could not be loaded")
            log.error("model not loaded: %s", load.error)
        return load.lm is not None

    def stop_reason(self, job: Job) -> str | None:
        """Why a running job must stop now: the server stopping, its submitter cancelling, nobody watching."""
        return "the server is stopping" if self._stopping.is_set() else self.book.stop_reason(job)

    def publish(self, job: Job, event: str, payload: dict) -> None:
        self.emit([self.book.publish(job, event, payload)])

    # -- one job ---------------------------------------------------------------------------------------
    def _execute(self, job: Job) -> None:
        t0 = time.perf_counter()
        try:
            if job.prepared is None:          # submitted on a web process of several: tokenized here
                self.offload(prepare_job, job, self.engine, self.limits)
            if job.kind != RUN:
                run_sweep(self, job)
                return
            self.publish(job, Event.RUN_STARTED, started_payload(job.run_id, job.lanes, job.prepared.to_dict(),
                                                                 self.status["model"]))
            run = self.offload(self.engine.start, job.prepared)
            while not run.done:
                reason = self.stop_reason(job)
                if reason:
                    self.emit(self.book.end(job, RunStatus.CANCELLED, reason))
                    return
                self.step_live()                  # a live step between two ticks: neither kind of work starves
                records = self.offload(run.tick)  # tick k = step k of every lane
                if self.pace and self.engine.lm is None:
                    self.sleep(self.pace * max((rec.ms for rec in records.values() if rec is not None), default=0) / 1000)
                self.publish(job, Event.TICK, tick_payload(job.run_id, run.t, records))
            records = {lane: [r.to_dict() for r in recs] for lane, recs in run.records().items()}
            metrics = run_metrics(records, job.prepared)
        except WorkloadError as e:
            self.emit(self.book.end(job, RunStatus.FAILED, f"its workload was refused: {e.field}: {e}"))
            return
        except Exception as e:  # one broken job must not stop the worker: end it with run_error, take the next
            log.exception("run %s failed", job.run_id)
            self.emit(self.book.end(job, RunStatus.FAILED, f"the engine failed during this run: {type(e).__name__}: {e}"))
            return
        store_error = self.save(job.run_id, job.prepared, job.lanes, records, metrics, job.created)
        self.publish(job, Event.RUN_FINISHED, finished_payload(job.run_id, metrics, store_error is None))
        if store_error is not None:
            self.emit([Send(Event.RUN_ERROR, error_payload(store_error, "storage", job.run_id, "storage"), job.run_id)])
        self.book.finish(job, stored=store_error is None)
        log.info("run %s finished: %d ticks in %.0f ms", job.run_id, run.t, (time.perf_counter() - t0) * 1000)

    def save(self, run_id: str, workload, lanes: list[str], records: dict, metrics: dict,
             created: float | None = None) -> str | None:
        """Store a finished run; the error message if the store failed (logged)."""
        try:
            self.offload(self.store.save, run_id, self.status["model"], workload.to_dict(), lanes, records, metrics,
                         created)
        except StoreError as e:
            log.error("%s", e)
            return f"this run finished but could not be saved, so its link will not survive a restart: {e}"
        return None


def _thread(fn) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread
