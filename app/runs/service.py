"""What the web handlers ask of runs, the same in both deployments: one process, or web processes over Redis.

`Runs` joins the run book (app.runs.book.Book, in memory or in Redis), the fan-out (who was sent what), the run
store, and, in a single process, the engine worker (`Preparer`: its model tokenizes at submit time). Handlers
call it and never see which deployment they are in. Every answer is a `Rejected` or something delivered to
sockets here. This module knows the book's and the store's interfaces, nothing of the engine: a web process
over Redis imports it and never torch.
"""
import logging
from typing import Protocol

from ..protocol import Event, Rejected, Send, records_from_log, replay_events
from .book import Book
from .fanout import deliver
from .job import Job
from .store import StoreError

log = logging.getLogger("batch_lanes.runs")


class Preparer(Protocol):
    """What the handlers ask of an engine worker in their own process (app.runs.worker.EngineWorker)."""
    def prepare(self, job: Job, workload=None) -> None:
        """Tokenize and check `job` (WorkloadError names the field); `workload`: its run, already parsed."""
    def count_tokens(self, prompts: list[str]) -> list[int]: ...


class Runs:
    def __init__(self, book: Book, store, server, limits, worker: Preparer | None = None, redis_client=None):
        self.book, self.store, self.server, self.limits = book, store, server, limits
        self.worker = worker              # the in-process engine worker (None on a web process over Redis)
        self.redis = redis_client
        self.classes = None               # this process's classes (app.runs.classes.Classes), set by the web wing

    # -- the model ---------------------------------------------------------------------------------
    def model_status(self) -> dict:
        return self.book.model_status()

    def check_ready(self) -> None:
        s = self.model_status()
        if not s["ready"]:
            raise Rejected("loading", f"the model could not be loaded: {s['error']}" if s["error"] else
                           f"the model is still loading ({s['progress']:.0%}); try again when it is ready")

    def health(self) -> tuple[dict, int]:
        """/healthz: the model (every engine worker's, summed up), the queue, and Redis when there is one."""
        try:
            s, queued = self.model_status(), self.book.queue_length()
        except Rejected as r:
            return {"status": "error", "ready": False, "redis": "unreachable", "error": r.message}, 503
        body = {"status": "error" if s["error"] else "ok", "ready": s["ready"], "model": s["model"],
                "device": s["device"], "progress": s["progress"], "queued": queued}
        delivering = getattr(self.server.manager, "delivering", lambda: True)()  # app.runs.fanout.RedisFanout
        if self.redis is not None:
            body.update(redis="ok", workers=s.get("workers", 0), delivery="ok" if delivering else "catching up")
        body["storage"] = self.store.health()   # a store that fails is said, though runs still run
        if not body["storage"]["ok"] and body["status"] == "ok":
            body["status"] = "degraded"
        if s["error"]:
            body["error"] = s["error"]
        pair = self.worker.live.pair() if self.worker is not None else None
        if pair is not None:   # a served P/D pair: its prefill worker's and decode engine's processes, where they ran
            body["pd"] = pair
        return body, 503 if s["error"] or not delivering else 200

    # -- submit, watch, cancel, leave ----------------------------------------------------------------
    def submit(self, sid: str, kind: str, request: dict, lanes: list[str], workload=None) -> Job:
        """Queue a checked job for `sid` and tell `sid`. When the model is in this process it is tokenized here, from
        `workload` (a run's request as the handler parsed it: never parsed twice)."""
        self.check_ready()
        code, role = self.classes.tag(sid) if self.classes is not None else (None, None)
        job = Job(kind, request, sid, lanes, class_code=code, role=role)
        if self.worker is not None:
            self.worker.prepare(job, workload)
        # In the room before the job exists, so its submitter misses nothing; its position delivered before any
        # event of the job, which an engine worker may send the moment the job is queued.
        with self.server.manager.watch_lock:
            self.server.enter_room(sid, job.run_id)
            try:
                sends = self.book.submit(job)
            except Rejected:
                self.server.leave_room(sid, job.run_id)
                raise
            deliver(self.server, sends)
        if code is not None:              # students follow a teacher's run; the teacher sees the class's queue
            deliver(self.server, self.classes.submitted(job, self.book.queued_jobs()))
        return job

    def watch(self, sid: str, run_id: str) -> None:
        """Join a live run or sweep (backlog, then live), or replay a finished run from the store."""
        fanout = self.server.manager
        try:
            if fanout.join(self.server, sid, run_id, lambda: self.book.watch(sid, run_id)) is not None:
                return
        except Rejected as r:   # Redis unreachable: a stored run replays from the store all the same
            if r.code != "unavailable" or not self._read_store(self.store.has, run_id):
                raise
        stored = self._read_store(self.store.load, run_id)
        if stored is None:
            raise Rejected("not_found", f"no run with id {run_id!r}", field="run_id", run_id=run_id)
        deliver(self.server, [Send(event, payload, sid, local=True) for event, payload in replay_events(
            run_id, stored["model"], stored["workload"], stored["lanes"], stored["records"], stored["metrics"])])

    def cancel(self, sid: str, run_id: str) -> None:
        deliver(self.server, self.book.cancel(sid, run_id))

    def cancel_for_class(self, class_code: str, run_id: str) -> None:
        """A class's teacher (checked by the caller) stops a student run of the class, queued or executing."""
        deliver(self.server, self.book.cancel(None, run_id, class_code=class_code))

    def pause_for_class(self, class_code: str, run_id: str, paused: bool) -> None:
        """A class's teacher (checked by the caller) pauses or resumes a running run of the class: its engine worker
        holds it between two steps and tells its room (app.runs.worker)."""
        self.book.pause(run_id, class_code, paused)

    def forget(self, sid: str) -> None:
        self.server.manager.forget(sid)
        try:
            deliver(self.server, self.book.forget(sid))
            if self.classes is not None:
                deliver(self.server, self.classes.forget(sid, self.book.queued_jobs()))
        except Rejected as r:  # Redis unreachable: its watchers count lapses with this process's heartbeat
            log.warning("could not forget socket: %s", r.message)

    # -- reads for HTTP ------------------------------------------------------------------------------
    def knows(self, run_id: str) -> bool:
        """Whether a page for `run_id` has something to show: a run (not a sweep) in the book or in the store."""
        try:
            if self.book.knows(run_id):
                return True
        except Rejected:        # Redis unreachable: what the store holds is still known
            pass
        return self._read_store(self.store.has, run_id)

    def stored_run(self, run_id: str) -> dict | None:
        """A finished run as `/api/runs/<id>` serves it: from the store, or from the book if the store failed it."""
        try:
            kept = self.book.finished_log(run_id)
        except Rejected:        # Redis unreachable: the store answers alone
            kept = None
        if kept is not None:
            job, events = kept
            started = next(p for e, p in events if e == Event.RUN_STARTED)
            finished = next(p for e, p in events if e == Event.RUN_FINISHED)
            return {"run_id": run_id, "created": job.created, "model": started["model"],
                    "workload": started["workload"], "lanes": job.lanes, "records": records_from_log(events, job.lanes),
                    "metrics": finished["metrics"]}
        return self._read_store(self.store.load, run_id)

    def count_tokens(self, prompts: list[str]) -> list[int]:
        """Chat-templated prompt tokens of each prompt, counted by the engine's tokenizer (here or on a worker)."""
        self.check_ready()
        if self.worker is None:
            counts = self.book.count_tokens(prompts)
            if counts is None:
                raise Rejected("unavailable", "no engine worker answered in time; token counts come when one does")
            return counts
        return self.worker.count_tokens(prompts)

    def _read_store(self, read, run_id: str):
        try:
            return read(run_id)
        except StoreError as e:
            log.error("%s", e)
            raise Rejected("storage", f"the run store cannot be read: {e}", run_id=run_id) from None

