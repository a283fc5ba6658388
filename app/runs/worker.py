"""The engine worker's loop: load the model, take a job from the run book, drive it, emit, store. Nothing else.

It owns one model on one device. In a single process it runs as the server's background task and emits
through the server; as `python -m app.engine_worker` it emits through Redis (app.engine_worker). Either way
the run book decides (queue, watchers, who must stop) and numbers every event; this loop only computes and
hands the book's answers to `emit`. Every job kind (a run, app.runs.steps; a sweep, app.runs.sweeps) goes
through the same loop: until it is done, check whether it must stop, give the live lane a step
(app.runs.live_driver), take the kind's next step. Forward passes go through `offload` (app.asyncmode). An
exception inside a job ends that job with `run_error`; the loop takes the next. Nothing a job or its book raises
ends the loop: over Redis, the book (app.runs.worker_book) keeps a running job's events while Redis is away.
This module knows the engine's public API and the book's, nothing of HTTP, sockets or Redis.
"""
import logging
import threading
import time
from pathlib import Path
from typing import Callable

from engine import Engine
from engine.worker.model import DEFAULT_GGUF
from engine.peers.vllm_options import vllm_lane_problem
from engine.workload.workload import WorkloadError

from ..asyncmode import make_offload
from ..protocol import Event, Rejected, RunStatus, Send
from .book import NEXT_RUN, PAUSE_CAP_S, Book, teacher_waits
from .job import RUN, SWEEP, Job, prepare_job
from .live_driver import LiveDriver
from .loader import ModelLoad
from .steps import JobContext, JobSteps, RunSteps
from .store import StoreError
from .sweeps import SweepSteps
from .tokens import count_prompt_tokens

log = logging.getLogger("batch_lanes.worker")
PAUSE_POLL_S = 0.05   # how often a paused run's loop looks whether it may go on (a live request still gets its step)


def vllm_status(lm) -> dict:
    """The vLLM lane capability the page reads: `vllm` (whether it may offer the lane) and, if not, why."""
    problem = vllm_lane_problem(lm)
    return {"vllm": problem is None, "vllm_problem": problem}


KINDS: dict[str, Callable[[JobContext, Job], JobSteps]] = {RUN: RunSteps, SWEEP: SweepSteps}


def initial_status(config: dict, engine: Engine | None) -> dict:
    lm = engine.lm if engine is not None else None
    return {"ready": engine is not None, "progress": 1.0 if engine is not None else 0.0, "error": None,
            "message": "ready" if engine is not None else "loading the model",
            "model": "simulator" if engine is not None and lm is None else
            lm.name if lm is not None else Path(config["MODEL"] or DEFAULT_GGUF).name,
            "device": "none" if engine is not None and lm is None else str(lm.device) if lm is not None else "",
            **vllm_status(lm)}


class EngineWorker:
    def __init__(self, book: Book, emit: Callable[[list], None], store, config: dict, engine: Engine | None = None,
                 start_task: Callable = None, sleep: Callable[[float], None] = time.sleep):
        self.book, self.emit, self.store = book, emit, store
        self.limits = config["LIMITS"]
        self.model_args = (config["MODEL"], config["DTYPE"], config["DEVICE"])
        self.offload = make_offload(config["ASYNC_MODE"])
        self.start_task = start_task or (lambda fn: _thread(fn))
        self.sleep = sleep
        self.pace = config.get("PACE", 0.0)        # the simulator's steps take this many times their simulated ms
        self.pause_cap_s = config.get("PAUSE_CAP_S", PAUSE_CAP_S)  # a paused run goes on by itself after this long
        self.engine = engine
        if engine is not None:
            engine.limits = self.limits           # the app's limits are the only limits
        self.status = initial_status(config, engine)
        book.set_model_status(self.status)
        self.prepare_lock = threading.Lock()      # one tokenization at a time from the handlers
        # The live lane (its slots 0: none, as on a worker process); the gateway holds it as its handle.
        self.live = LiveDriver(config.get("LIVE_SLOTS", 0), lambda: self.engine, lambda: self.status, self.wake,
                               self.offload, self.prepare_lock, pace=self.pace, sleep=self.sleep,
                               options=config.get("LIVE_OPTIONS"))
        self.on_live_step: Callable | None = None  # what a live step sends (app.live.gateway.LiveGateway.after_step)
        self._stopping = threading.Event()
        self._task = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = self.start_task(self._serve)

    def stopping(self) -> bool:
        """Whether stop() was called: the app's other chores (its stats line) end with the worker."""
        return self._stopping.is_set()

    def stop(self, timeout: float = 30) -> None:
        """Stop taking jobs, cancel the running one at its next tick, and wait for the loop to end."""
        self._stopping.set()
        self.book.wake()
        join = getattr(self._task, "join", None)  # a Thread; a green thread just ends
        if join is not None:
            join(timeout)
        self.live.close()                         # a served P/D pair's prefill worker ends with the server

    def alive(self) -> bool:
        """Whether the loop still runs (GET /health): a Thread's is_alive, a green thread's not `dead`."""
        task = getattr(self, "_task", None)
        if task is None or self._stopping.is_set():
            return False
        return task.is_alive() if hasattr(task, "is_alive") else not getattr(task, "dead", False)

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
        self.book.wake()

    def ensure_live(self):
        """The live lane (engine.live.LiveLane), made once the model is ready (None before, or where there is none)."""
        return self.live.ensure()

    def step_live(self) -> None:
        """One step of the live lane if it has work: between two page ticks, so neither kind of work starves."""
        record = self.live.step()
        if record is not None and self.on_live_step is not None:
            self.emit(self.on_live_step(record))

    # -- asked by the web handlers of this process (app.runs.service) ------------------------------------
    def prepare(self, job: Job, workload=None) -> None:
        """Tokenize and check `job` now (WorkloadError names the field); `workload`: its run, already parsed."""
        with self.prepare_lock:
            self.offload(prepare_job, job, self.engine, self.limits, workload)

    def count_tokens(self, prompts: list[str]) -> list[int]:
        with self.prepare_lock:
            return self.offload(count_prompt_tokens, self.engine, prompts)

    # -- the loop ----------------------------------------------------------------------------------------
    def _serve(self) -> None:
        if self.engine is None and not self._load_model():
            return
        while not self._stopping.is_set():
            try:
                self.step_live()
                # idle: a short wait, so a live request arriving through Redis (app.runs.live_link) waits <= 0.1 s
                job, sends = self.book.take(timeout=0 if self.live.has_work() else 0.1)
            except Exception as e:  # a shared book (Redis) unreachable: say so, keep trying until it is back
                log.warning("run queue unreachable, retrying in 1 s: %s: %s", type(e).__name__, e)
                self.sleep(1.0)
                continue
            try:
                self.emit(sends + self.book.housekeeping())
            except Exception as e:  # the job taken is not dropped for that: the next turn does the chores
                log.warning("housekeeping skipped: %s: %s", type(e).__name__, e)
            try:
                if job is not None and not self._stopping.is_set():
                    self._execute(job)
                elif job is not None:
                    self.emit(self.book.end(job, RunStatus.CANCELLED, "the server is stopping"))
            except Exception:  # even a job that could not be ended (its book unreachable) must not stop the worker
                log.exception("run %s could not be ended; taking the next", job.run_id)

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
            self._set_status(ready=True, progress=1.0, message="ready", model=load.lm.name, device=str(load.lm.device),
                             step_noise=load.step_noise,  # the page shows it beside the ms figures (static/js/lanes/noise.js)
                             **vllm_status(load.lm))
            log.info("model %s ready on %s after %.1f s", load.lm.name, load.lm.device, time.perf_counter() - t0)
        elif load.error is not None:
            self._set_status(error=load.error, message="the model could not be loaded")
            log.error("model not loaded: %s", load.error)
        return load.lm is not None

    def stop_reason(self, job: Job) -> str | None:
        """Why a running job must stop now: the server stopping, its submitter cancelling, nobody watching, or its
        class's teacher queueing another run while it is paused."""
        if self._stopping.is_set():
            return "the server is stopping"
        if reason := self.book.stop_reason(job):
            return reason
        try:
            paused = job.class_code is not None and self.book.paused_since(job) is not None
            return NEXT_RUN if paused and teacher_waits(job, self.book.queued_jobs()) else None
        except Rejected:                      # its book unreachable: it goes on
            return None

    def publish(self, job: Job, event: str, payload: dict) -> None:
        send = self.book.publish(job, event, payload)
        if send is not None:  # None: the book keeps it until its log takes it (Redis away: app.runs.worker_book)
            self.emit([send])

    # -- one job ---------------------------------------------------------------------------------------
    def _execute(self, job: Job) -> None:
        """Drive one job of any kind to its end: the one loop every run and sweep goes through."""
        steps = KINDS[job.kind](self._context(job), job)
        try:
            if job.prepared is None:          # submitted on a web process of several: tokenized here
                self.offload(prepare_job, job, self.engine, self.limits)
            steps.start()
            held = {"paused": False}
            while not steps.done:
                reason = self.stop_reason(job)
                if reason:
                    self.emit(self.book.end(job, RunStatus.CANCELLED, reason))
                    return
                self.step_live()              # a live step between two steps: neither kind of work starves
                if not self._held(job, held):
                    steps.step()
            steps.finish()
        except WorkloadError as e:
            self.emit(self.book.end(job, RunStatus.FAILED, f"its workload was refused: {e.field}: {e}"))
        except Exception as e:  # one broken job must not stop the worker: end it with run_error, take the next
            log.exception("run %s failed", job.run_id)
            self.emit(self.book.end(job, RunStatus.FAILED, f"the engine failed during this run: {type(e).__name__}: {e}"))
        finally:
            steps.close()  # a tensor-parallel lane's ranks end with the run, however it ended

    def _held(self, job: Job, held: dict) -> bool:
        """Whether `job` waits this turn, paused by its class's teacher (then after a short sleep). Its room is told
        (`run_paused`, logged) when it pauses and when it goes on: resumed by the teacher, or after `pause_cap_s`,
        when the pause is dropped, so that nothing waits on a teacher who forgot it."""
        since = self.book.paused_since(job) if job.class_code is not None else None
        reason = "resumed by the teacher"
        if since is not None and time.time() - since >= self.pause_cap_s:
            try:
                self.book.pause(job.run_id, job.class_code, False)
            except Rejected:                  # its book unreachable: it goes on all the same, and says so
                pass
            since, reason = None, f"resumed by itself after {self.pause_cap_s:g} s paused"
        if (since is not None) != held["paused"]:
            held["paused"] = since is not None
            self.publish(job, Event.RUN_PAUSED, {"run_id": job.run_id, "paused": held["paused"],
                                                 "reason": "paused by the teacher" if held["paused"] else reason})
        if since is not None:
            self.sleep(PAUSE_POLL_S)
        return since is not None

    def _context(self, job: Job) -> JobContext:
        """What `job`'s kind may use: this worker's engine, offload and store, and the book's answers for `job`."""
        return JobContext(engine=self.engine, model=self.status["model"], offload=self.offload,
                          publish=lambda event, payload: self.publish(job, event, payload),
                          emit=lambda sends: self.emit(sends),
                          set_progress=lambda fraction: self.book.set_progress(job, fraction),
                          save=self.save, finish=lambda stored: self.book.finish(job, stored=stored),
                          pace=self.pace, sleep=self.sleep)

    def save(self, run_id: str, workload, lanes: list[str], records: dict, metrics: dict,
             created: float | None = None, model: str | None = None) -> str | None:
        """Store a finished run (`model`: what ran it, when not this worker's model: a simulated sweep's "simulator");
        the error message if the store failed (logged)."""
        try:
            self.offload(self.store.save, run_id, model or self.status["model"], workload.to_dict(), lanes, records,
                         metrics, created)
        except StoreError as e:
            log.error("%s", e)
            return f"this run finished but could not be saved, so its link will not survive a restart: {e}"
        return None


def _thread(fn) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread
