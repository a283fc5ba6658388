"""The engine worker: the one (green) thread that owns the model, the run queue and every emit of a run.

It loads the model (reporting progress as `model_status`), then takes queued runs one at a time and
steps each run's lanes together: one `run.tick()`, one `tick` event to the run's room. Forward passes
go through `offload` (`eventlet.tpool.execute` in eventlet mode, a plain call in threading mode), so an
eventlet hub keeps serving while the model computes. Socket handlers call `enqueue`, `watch` and
`forget`; all shared state is guarded by one lock, and every emit of a run happens under it, so a late
watcher's backlog and the live ticks can neither overlap nor leave a gap. A run whose watchers have all
left is cancelled after `CANCEL_GRACE_S`; an exception inside a run ends that run with `run_error` and
the worker serves the next one. This module knows the engine's public API and the event names, nothing
of HTTP or of how input is validated.
"""
import logging
import threading
import time
from collections import deque
from pathlib import Path

from engine import Engine
from engine.metrics import run_metrics
from engine.runner import estimate_prompt_tokens
from engine.sweep import prepare_sweep
from engine.model import DEFAULT_GGUF
from engine.workload import Workload

from .loader import ModelLoad
from .runs import LiveRun, Rejected, RunStatus, error_payload, replay_events
from .store import RunStore, StoreError
from .sweeps import LiveSweep, execute_sweep

log = logging.getLogger("batch_lanes.worker")
NAMESPACE = "/"


def make_offload(async_mode: str):
    """How blocking compute is called: through eventlet's thread pool, or directly on this thread."""
    if async_mode == "eventlet":
        from eventlet import tpool
        return tpool.execute
    return lambda fn, *args, **kwargs: fn(*args, **kwargs)


class EngineWorker:
    def __init__(self, server, config: dict, store: RunStore, engine: Engine | None = None):
        self.server = server                      # the socketio.Server this app's clients are on
        self.store = store
        self.limits = config["LIMITS"]
        self.max_queued = config["MAX_QUEUED_RUNS"]
        self.grace_s = config["CANCEL_GRACE_S"]
        self.recent_runs = config["RECENT_RUNS"]
        self.model_args = (config["MODEL"], config["DTYPE"], config["DEVICE"])
        self.offload = make_offload(config["ASYNC_MODE"])
        self.engine = engine
        if engine is not None:
            engine.limits = self.limits           # the app's limits are the only limits
        self.lock = threading.RLock()
        self.wakeup = threading.Condition(self.lock)
        self.prepare_lock = threading.Lock()      # one tokenization at a time from the handlers
        self.queue: deque[LiveRun] = deque()      # waiting runs, next first
        self.runs: dict[str, LiveRun] = {}        # live runs and the latest ended ones, oldest first
        self.active: dict[str, str] = {}          # socket id -> its queued or running run's id
        self._stopping = threading.Event()
        self._task = None
        lm = engine.lm if engine is not None else None
        self.status = {"ready": engine is not None, "progress": 1.0 if engine is not None else 0.0,
                       "message": "ready" if engine is not None else "loading the model", "error": None,
                       "model": "simulator" if engine is not None and lm is None else
                       lm.name if lm is not None else Path(config["MODEL"] or DEFAULT_GGUF).name,
                       "device": "none" if engine is not None and lm is None else
                       str(lm.device) if lm is not None else ""}

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = self.server.start_background_task(self._serve)

    def stop(self, timeout: float = 30) -> None:
        """Stop taking runs, cancel the running one at its next tick, and wait for the worker to end."""
        self._stopping.set()
        with self.wakeup:
            self.wakeup.notify_all()
        join = getattr(self._task, "join", None)  # a Thread in threading mode; a green thread just ends
        if join is not None:
            join(timeout)

    @property
    def ready(self) -> bool:
        return self.status["ready"]

    def _set_status(self, **changes) -> None:
        self.status = {**self.status, **changes}  # replaced whole, so readers never see half an update

    def _serve(self) -> None:
        if self.engine is None and not self._load_model():
            return
        while not self._stopping.is_set():
            live = self._next_run()
            if live is not None:
                self._execute(live)

    def _load_model(self) -> bool:
        load, t0, sent = ModelLoad(*self.model_args, self.limits.max_slots), time.perf_counter(), None
        load.start(self.server, self.offload)
        while not load.done and not self._stopping.is_set():
            if load.progress != sent:  # publish progress from this thread, as it changes
                sent = load.progress
                self._set_status(progress=sent[0], message=sent[1])
                self.emit("model_status", self.status)
            self.server.sleep(0.1)
        if load.lm is not None:
            self.engine = Engine(load.lm, self.limits)
            self._set_status(ready=True, progress=1.0, message="ready", model=load.lm.name, device=str(load.lm.device))
            log.info("model %s ready on %s after %.1f s", load.lm.name, load.lm.device, time.perf_counter() - t0)
        elif load.error is not None:
            self._set_status(error=load.error, message="the model could not be loaded")
            log.error("model not loaded: %s", load.error)
        self.emit("model_status", self.status)
        return load.lm is not None

    # -- called by socket handlers -----------------------------------------------------------------
    def check_can_submit(self, sid: str) -> None:
        """Raise `Rejected` if `sid` may not submit now (model loading, a run in progress, queue full)."""
        if not self.ready:
            s = self.status
            raise Rejected("loading", f"the model could not be loaded: {s['error']}" if s["error"] else
                           f"the model is still loading ({s['progress']:.0%}); try again when it is ready")
        with self.lock:
            if sid in self.active:
                run_id = self.active[sid]
                raise Rejected("active_run", f"you already have a run in progress ({run_id}): one run per "
                               f"client at a time", run_id=run_id)
            if len(self.queue) >= self.max_queued:
                raise Rejected("busy", f"the server is busy: {len(self.queue)} runs are waiting, the limit is "
                               f"{self.max_queued}; try again in a minute")

    def prepare(self, workload: Workload) -> Workload:
        """Tokenize and check token limits (raises WorkloadError); off the eventlet hub in eventlet mode."""
        with self.prepare_lock:
            return self.offload(self.engine.prepare, workload)

    def count_tokens(self, prompts: list[str]) -> list[int]:
        """Chat-templated prompt tokens of each prompt (the simulator's estimate without a model); `Rejected` while
        the model loads."""
        if not self.ready:
            raise Rejected("loading", "the model is still loading; token counts come when it is ready")
        lm = self.engine.lm
        with self.prepare_lock:
            return self.offload(lambda: [estimate_prompt_tokens(p) if lm is None else len(lm.encode_prompt(p))
                                         for p in prompts])

    def prepare_sweep(self, obj: dict, rates: list[float], lanes, burstiness: float | None) -> list:
        """Every rate's workload, tokenized and checked (raises WorkloadError); off the eventlet hub."""
        with self.prepare_lock:
            return self.offload(prepare_sweep, self.engine, obj, rates, self.limits, lanes, burstiness)

    def enqueue(self, sid: str, workload: Workload) -> LiveRun:
        """Queue a checked run of `workload` on its lanes for `sid`, put `sid` in its room and tell it its position."""
        return self._enqueue(sid, LiveRun(workload, workload.lane_names, sid))

    def enqueue_sweep(self, sid: str, sweep: LiveSweep) -> LiveSweep:
        """Queue a checked sweep for `sid`: it waits in the same queue as runs, one per client."""
        return self._enqueue(sid, sweep)

    def _enqueue(self, sid: str, live):
        with self.wakeup:
            self.check_can_submit(sid)
            live.watchers.add(sid)
            self.runs[live.run_id] = live
            self.active[sid] = live.run_id
            self.queue.append(live)
            self.server.enter_room(sid, live.run_id, namespace=NAMESPACE)
            self.emit("run_queued", {"run_id": live.run_id, "position": len(self.queue)}, to=sid)
            self.wakeup.notify()
            return live

    def watch(self, sid: str, run_id: str) -> None:
        """Join a live run's room and send its backlog, or replay a finished run; `Rejected` otherwise."""
        with self.lock:
            live = self.runs.get(run_id)
            if isinstance(live, LiveSweep):
                self._watch_sweep(sid, live)
                return
            if live is not None and live.is_live:
                self.server.enter_room(sid, run_id, namespace=NAMESPACE)
                live.watchers.add(sid)
                live.orphaned_at = None
                if live.status is RunStatus.QUEUED:
                    self.emit("run_queued", {"run_id": run_id, "position": self.queue.index(live) + 1}, to=sid)
                else:
                    self.emit("run_started", live.started_payload(self.status["model"]), to=sid)
                    for tick in live.ticks:
                        self.emit("tick", {**tick, "replay": True}, to=sid)
                return
            if live is not None and live.status is not RunStatus.FINISHED:
                raise Rejected(live.status.value, f"run {run_id} was {live.status.value}: {live.error}", run_id=run_id)
            stored = self._remembered(live)
        if stored is None:
            stored = self._read_store(self.store.load, run_id)
        if stored is None:
            raise Rejected("not_found", f"no run with id {run_id!r}", field="run_id", run_id=run_id)
        for event, payload in replay_events(run_id, stored["model"], stored["workload"], stored["lanes"],
                                            stored["records"], stored["metrics"]):
            self.emit(event, payload, to=sid)

    def _watch_sweep(self, sid: str, sweep: LiveSweep) -> None:
        """Join a sweep's room and send what it has so far (lock held); a failed or cancelled one is an error."""
        if not sweep.is_live and sweep.status is not RunStatus.FINISHED:
            raise Rejected(sweep.status.value, f"sweep {sweep.run_id} was {sweep.status.value}: {sweep.error}",
                           run_id=sweep.run_id)
        if sweep.is_live:
            self.server.enter_room(sid, sweep.run_id, namespace=NAMESPACE)
            sweep.watchers.add(sid)
            sweep.orphaned_at = None
        if sweep.status is RunStatus.QUEUED:
            self.emit("run_queued", {"run_id": sweep.run_id, "position": self.queue.index(sweep) + 1}, to=sid)
            return
        for event, payload in sweep.replay_events(self.status["model"]):
            self.emit(event, payload, to=sid)

    def cancel(self, sid: str, run_id: str) -> None:
        """`sid` cancels its own queued or running run or sweep; `Rejected` if it has no such live run."""
        with self.wakeup:
            live = self.runs.get(run_id)
            if live is None or not live.is_live or live.submitter != sid:
                raise Rejected("not_found", f"you have no queued or running run {run_id!r} to cancel", field="run_id",
                               run_id=run_id)
            if live.status is RunStatus.QUEUED:
                self.queue.remove(live)
                self.end(live, RunStatus.CANCELLED, "cancelled by its submitter")
                self._send_positions()
            else:
                live.cancel_requested = True  # the worker stops it before its next tick
            self.wakeup.notify()

    def stored_run(self, run_id: str) -> dict | None:
        """A finished run as `/api/runs/<id>` serves it: from the store, or from memory if the store failed it;
        `Rejected` if the store cannot be read."""
        with self.lock:
            run = self._remembered(self.runs.get(run_id))
        return run if run is not None else self._read_store(self.store.load, run_id)

    def _remembered(self, live: LiveRun | None) -> dict | None:
        """A finished run memory still holds (the store failed it), shaped as the store returns it (lock held)."""
        if live is None or live.status is not RunStatus.FINISHED or not live.ticks:
            return None
        return {"run_id": live.run_id, "created": live.created, "model": self.status["model"],
                "workload": live.workload.to_dict(), "lanes": live.lanes, "records": live.records(),
                "metrics": live.metrics}

    def _read_store(self, read, run_id: str):
        """`read(run_id)` on the store, off the eventlet hub; `Rejected` if the store cannot be read."""
        try:
            return self.offload(read, run_id)
        except StoreError as e:
            log.error("%s", e)
            raise Rejected("storage", f"the run store cannot be read: {e}", run_id=run_id) from None

    def knows(self, run_id: str) -> bool:
        """Whether a page for `run_id` has something to show: a run (not a sweep) in memory or in the store."""
        with self.lock:
            if isinstance(self.runs.get(run_id), LiveRun):
                return True
        return self._read_store(self.store.has, run_id)

    def forget(self, sid: str) -> None:
        """`sid` disconnected: it watches nothing any more; a run nobody watches starts its grace period."""
        with self.wakeup:
            self.active.pop(sid, None)
            for live in self.runs.values():
                if live.is_live and sid in live.watchers:
                    live.watchers.discard(sid)
                    if not live.watchers:
                        live.orphaned_at = time.monotonic()
                        log.info("run %s has no watchers left", live.run_id)
            self._prune_orphans()
            self.wakeup.notify()

    def queue_length(self) -> int:
        with self.lock:
            return len(self.queue)

    # -- the worker's own side ---------------------------------------------------------------------
    def emit(self, event: str, payload: dict, to: str | None = None) -> None:
        self.server.emit(event, payload, to=to, namespace=NAMESPACE)

    def _orphaned(self, live: LiveRun) -> bool:
        return live.orphaned_at is not None and time.monotonic() - live.orphaned_at >= self.grace_s

    def _prune_orphans(self) -> None:
        """Cancel queued runs nobody has watched for the grace period (lock held)."""
        gone = [live for live in self.queue if self._orphaned(live)]
        for live in gone:
            self.queue.remove(live)
            self.end(live, RunStatus.CANCELLED, "its submitter left and nobody watched it")
        if gone:
            self._send_positions()

    def _send_positions(self) -> None:
        for i, live in enumerate(self.queue):
            self.emit("run_queued", {"run_id": live.run_id, "position": i + 1}, to=live.run_id)

    def _next_run(self) -> LiveRun | None:
        with self.wakeup:
            self._prune_orphans()
            if not self.queue:
                self.wakeup.wait(timeout=0.5)  # woken by enqueue, forget and stop; the timeout prunes orphans
                self._prune_orphans()
            if not self.queue or self._stopping.is_set():
                return None
            live = self.queue.popleft()
            live.status = RunStatus.RUNNING
            self._send_positions()
            started = "sweep_started" if isinstance(live, LiveSweep) else "run_started"
            self.emit(started, live.started_payload(self.status["model"]), to=live.run_id)
            return live

    def stop_reason(self, live: LiveRun | LiveSweep) -> str | None:
        """Why a running run or sweep must stop now, or None (lock held; prunes queued orphans on the way)."""
        self._prune_orphans()
        if self._stopping.is_set():
            return "the server is stopping"
        if live.cancel_requested:
            return "cancelled by its submitter"
        if self._orphaned(live):
            return "its submitter left and nobody watched it"
        return None

    def _execute(self, live: LiveRun | LiveSweep) -> None:
        if isinstance(live, LiveSweep):
            execute_sweep(self, live)
            return
        t0 = time.perf_counter()
        try:
            run = self.offload(self.engine.start, live.workload)
            while not run.done:
                with self.lock:
                    reason = self.stop_reason(live)
                    if reason:
                        self.end(live, RunStatus.CANCELLED, reason)
                        return
                records = self.offload(run.tick)  # tick k = step k of every lane
                with self.lock:
                    tick = live.tick_payload(run.t, records)
                    live.ticks.append(tick)
                    self.emit("tick", tick, to=live.run_id)
            records = live.records()
            metrics = run_metrics(records, live.workload)
        except Exception as e:  # one broken run must not stop the worker: end it with run_error, serve the next
            log.exception("run %s failed after %d ticks", live.run_id, len(live.ticks))
            with self.lock:
                self.end(live, RunStatus.FAILED, f"the engine failed during this run: {type(e).__name__}: {e}")
            return
        store_error, ticks = self._save(live, records, metrics), len(live.ticks)
        with self.lock:
            live.metrics = metrics
            self.emit("run_finished", {"run_id": live.run_id, "metrics": metrics, "stored": store_error is None},
                       to=live.run_id)
            if store_error is not None:
                self.emit("run_error", error_payload(store_error, "storage", live.run_id, "storage"), to=live.run_id)
            self.retire(live, RunStatus.FINISHED)
            if store_error is None:
                live.ticks = []  # the store has them: memory keeps only runs it could not save
        log.info("run %s finished: %d ticks in %.0f ms, %d watchers", live.run_id, ticks,
                 (time.perf_counter() - t0) * 1000, len(live.watchers))

    def _save(self, live: LiveRun, records: dict[str, list[dict]], metrics: dict) -> str | None:
        """Store a finished run; the error message if the store failed (logged, and sent to the room)."""
        try:
            self.offload(self.store.save, live.run_id, self.status["model"], live.workload.to_dict(), live.lanes,
                         records, metrics, live.created)
        except StoreError as e:
            log.error("%s", e)
            return f"this run finished but could not be saved, so its link will not survive a restart: {e}"
        return None

    def end(self, live: LiveRun, status: RunStatus, reason: str) -> None:
        """End a run that did not finish (lock held): tell its room why."""
        live.error = reason
        code = "cancelled" if status is RunStatus.CANCELLED else "failed"
        self.emit("run_error", error_payload(f"run {live.run_id} {status.value}: {reason}", None, live.run_id, code),
                   to=live.run_id)
        log.info("run %s %s after %d ticks", live.run_id, status.value, len(live.ticks))
        self.retire(live, status)

    def retire(self, live: LiveRun, status: RunStatus) -> None:
        """Mark a run ended and free its client's slot; keep only the latest ended runs in memory (lock held)."""
        live.status = status
        if live.submitter is not None and self.active.get(live.submitter) == live.run_id:
            del self.active[live.submitter]
        if status is not RunStatus.FINISHED:
            live.ticks = []  # nobody can replay a run that did not finish
        ended = [run_id for run_id, run in self.runs.items() if not run.is_live]
        for run_id in ended[:max(0, len(ended) - self.recent_runs)]:
            del self.runs[run_id]
