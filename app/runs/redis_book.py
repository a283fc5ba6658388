"""The run book kept in Redis, shared by every web process and engine worker of one deployment.

Same questions and answers as `app.runs.memory_book.MemoryBook` (app.runs.book.Book) (it returns what to send), with the state in Redis:

    batch-lanes:queue            list of queued run ids, next first (engine workers BLMOVE from it)
    batch-lanes:taken:<worker>   the runs a worker took and has not ended (re-read if it dies)
    batch-lanes:job:<id>         hash: job (JSON), status, error, cancel, paused (since), worker, orphaned_at, progress
    batch-lanes:log:<id>         list: every event of the run's room, as JSON [event, payload]; seq = index + 1
    batch-lanes:watchers:<id>    hash: web process id -> how many of its sockets watch the run
    batch-lanes:active           hash: socket id -> its queued or running run
    batch-lanes:web:<id>, worker:<id>, workers, rpc, reply:<id>   heartbeats (a worker's holds its model status),
                                 the engine worker ids, token-count questions and answers

A web process whose heartbeat lapsed (kill -9) no longer counts as watching; a dead engine worker's taken runs
end with `run_error` at the next housekeeping. Neither verdict is given for a while after Redis restarted or was
unreachable (`quiet`): heartbeats and watcher counts need a beat or two to come back, and a run watched all along
must not be cancelled because Redis forgot who watched it (docs/scale-out.md). Web-side calls turn a Redis failure
into `Rejected("unavailable")`. This module knows Redis and jobs, nothing of sockets or torch.
"""
import functools
import json
import logging
import time

import redis

from ..protocol import Event, Rejected, RunStatus, Send, ended_payload, new_run_id, queued_payload
from .book import backlog, cancel_reason, check_pause, may_cancel
from .job import Job
from .queue_order import check_class_cap, position_payload
from .redis_queue import enqueue, jobs_of, running_jobs

log = logging.getLogger("batch_lanes.redis_book")
P = "batch-lanes:"
HEARTBEAT_S, ALIVE_S = 2.0, 10   # how often heartbeats are renewed; how long one lasts
RECENT_S = 3600                  # ended runs' bookkeeping (and a log the store failed) kept this long


def web_side(method):
    """A web handler's call: Redis unreachable becomes one clear refusal, not a crash."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except redis.RedisError as e:
            log.warning("%s refused, Redis unreachable: %s: %s", method.__name__, type(e).__name__, e)
            raise Rejected("unavailable", f"the run queue (Redis) is unreachable, try again in a moment: "
                           f"{type(e).__name__}") from None
    return call


class RedisBook:
    def __init__(self, client: redis.Redis, me: str, max_queued: int, grace_s: float, class_cap: int = 8):
        self.r, self.me = client, me   # `me`: this process's id (a web process's or an engine worker's)
        self.max_queued, self.grace_s = max_queued, grace_s
        self.class_cap = class_cap     # queued student runs one class may hold (app.runs.queue_order)
        self.watching: dict[str, set[str]] = {}  # this web process's socket id -> the runs it counts as watching
        self.trust_from = 0.0    # monotonic time from which "nobody watches" and "that worker died" may be said
        self.redis_id: str | None = None   # the Redis server's run_id at the last beat (another: it restarted)
        self.down = False        # the last beat failed

    # -- the model and the processes ---------------------------------------------------------------
    @web_side
    def model_status(self) -> dict:
        """Every live engine worker's status, summed up: ready as soon as one is."""
        ids = sorted(self.r.smembers(P + "workers"))
        found = [json.loads(s) for s in self.r.mget([P + "worker:" + i for i in ids]) if s] if ids else []
        ready = [s for s in found if s["ready"]]
        if ready:
            return {**ready[0], "workers": len(ready), "message": f"ready ({len(ready)} engine "
                    f"worker{'s' if len(ready) > 1 else ''})", "model": ", ".join(sorted({s["model"] for s in ready}))}
        if found and all(s["error"] for s in found):
            return {**found[0], "workers": 0}
        best = max(found, key=lambda s: s["progress"], default={"progress": 0.0, "model": "",
                                                                 "message": "waiting for an engine worker"})
        return {"ready": False, "workers": 0, "device": "", "error": None,
                **{k: best[k] for k in ("progress", "message", "model")}}

    def beat_worker(self, status: dict) -> None:
        self._beat(self.r.pipeline().set(P + "worker:" + self.me, json.dumps(status), ex=ALIVE_S).sadd(P + "workers", self.me))

    def beat_web(self) -> None:
        self._beat(self.r.pipeline().set(P + "web:" + self.me, "1", ex=ALIVE_S))

    def _beat(self, pipe) -> None:
        """Renew a heartbeat; after Redis was unreachable or restarted (its run_id changed), be `quiet` a while."""
        try:
            redis_id = pipe.info("server").execute()[-1]["run_id"]
        except redis.RedisError:
            self.down = True
            raise
        if self.down or (self.redis_id is not None and redis_id != self.redis_id):
            log.warning("Redis %s: no run is taken for orphaned, nor a worker for dead, for %.0f s",
                        "is reachable again" if self.down else "restarted", self.grace_s + 2 * HEARTBEAT_S)
            self.trust_from = time.monotonic() + self.grace_s + 2 * HEARTBEAT_S
        self.redis_id, self.down = redis_id, False

    @property
    def quiet(self) -> bool:
        """Whether Redis came back too recently to say that nobody watches a run or that a worker died."""
        return time.monotonic() < self.trust_from

    # -- asked by web handlers ---------------------------------------------------------------------
    @web_side
    def submit(self, job: Job) -> list[Send]:
        if not self.r.hsetnx(P + "active", job.sid, job.run_id):
            run_id = self.r.hget(P + "active", job.sid)
            if self.r.hget(P + "job:" + run_id, "status") in (RunStatus.QUEUED, RunStatus.RUNNING):
                raise Rejected("active_run", f"you already have a run in progress ({run_id}): one run per client at "
                               f"a time", run_id=run_id)
            self.r.hset(P + "active", job.sid, job.run_id)
        if self.r.llen(P + "queue") >= self.max_queued:
            self.r.hdel(P + "active", job.sid)
            raise Rejected("busy", f"the server is busy: {self.max_queued} runs wait already; try again in a minute")
        try:
            check_class_cap(self.queued_jobs(), job, self.class_cap)
        except Rejected:
            self.r.hdel(P + "active", job.sid)
            raise
        self.r.hset(P + "job:" + job.run_id, mapping={"job": json.dumps(job.to_dict()), "status": RunStatus.QUEUED})
        self._count_watcher(job.sid, job.run_id)
        if enqueue(self.r, P, job):            # at the end
            queued = self.queued_jobs()
            at = next((i for i, q in enumerate(queued) if q.run_id == job.run_id), None)
            payload = queued_payload(job.run_id, 1) if at is None else position_payload(queued, at)  # None: taken at once
            return [Send(Event.RUN_QUEUED, payload, job.sid, local=True)]
        return self._positions()                          # a teacher's, before its students: they moved back

    @web_side
    def watch(self, sid: str, run_id: str) -> list[Send] | None:
        fields = self.r.hgetall(P + "job:" + run_id)
        if not fields:
            return None
        status, job = RunStatus(fields["status"]), Job.from_dict(json.loads(fields["job"]))
        if status in (RunStatus.FAILED, RunStatus.CANCELLED):
            raise Rejected(status.value, f"run {run_id} was {status.value}: {fields.get('error')}", run_id=run_id)
        if status.is_live:
            self._count_watcher(sid, run_id)
        queued = self.queued_jobs() if status is RunStatus.QUEUED else []
        position = next((i for i, q in enumerate(queued) if q.run_id == run_id), None)
        if position is not None:
            return [Send(Event.RUN_QUEUED, position_payload(queued, position), sid, local=True)]
        events = self._log(run_id)
        if status is RunStatus.FINISHED and not events:
            return None
        return backlog(events, sid, job, RunStatus(self.r.hget(P + "job:" + run_id, "status")),
                       float(fields.get("progress", 0.0)))

    @web_side
    def cancel(self, sid: str, run_id: str, class_code: str | None = None) -> list[Send]:
        fields = self.r.hgetall(P + "job:" + run_id)
        if not fields or not may_cancel(Job.from_dict(json.loads(fields["job"])), sid, class_code) \
                or not RunStatus(fields["status"]).is_live:
            raise Rejected("not_found", f"you have no queued or running run {run_id!r} to cancel", field="run_id",
                           run_id=run_id)
        self.r.hset(P + "job:" + run_id, "cancel", reason := cancel_reason(class_code))  # stops before its next tick
        if not self.r.lrem(P + "queue", 1, run_id):
            return []
        return self._end(self._job(run_id), RunStatus.CANCELLED, reason) + self._positions()

    @web_side
    def pause(self, run_id: str, class_code: str, paused: bool) -> None:
        fields = self.r.hgetall(key := P + "job:" + run_id)   # `paused`: since when (its worker's paused_since)
        check_pause(fields and Job.from_dict(json.loads(fields["job"])), fields and RunStatus(fields["status"]), class_code)
        self.r.hset(key, "paused", fields.get("paused", repr(time.time()))) if paused else self.r.hdel(key, "paused")

    @web_side
    def forget(self, sid: str) -> list[Send]:
        self.r.hdel(P + "active", sid)
        for run_id in self.watching.pop(sid, ()):
            self.r.hincrby(P + "watchers:" + run_id, self.me, -1)
        return []

    queue_length = web_side(lambda self: self.r.llen(P + "queue"))

    @web_side
    def queued_jobs(self) -> list[Job]:
        """The queued jobs, next first."""
        return jobs_of(self.r, P, self.r.lrange(P + "queue", 0, -1))

    running_jobs = web_side(lambda self: running_jobs(self.r, P))   # what engine workers execute now

    @web_side
    def knows(self, run_id: str) -> bool:
        return json.loads(self.r.hget(P + "job:" + run_id, "job") or "{}").get("kind") == "run"

    @web_side
    def finished_log(self, run_id: str) -> tuple[Job, list[tuple[str, dict]]] | None:
        fields = self.r.hgetall(P + "job:" + run_id)
        if not fields or fields["status"] != RunStatus.FINISHED:
            return None
        log = self._log(run_id)
        return (Job.from_dict(json.loads(fields["job"])), log) if log else None

    @web_side
    def count_tokens(self, prompts: list[str], timeout_s: int = 10) -> list[int] | None:
        """Ask any engine worker to count prompt tokens; None if none answered in time."""
        ask = new_run_id()
        self.r.lpush(P + "rpc", json.dumps({"id": ask, "prompts": prompts}))
        answer = self.r.blpop([P + "reply:" + ask], timeout=timeout_s)
        return None if answer is None else json.loads(answer[1])

    # -- asked by engine workers ---------------------------------------------------------------------
    def take(self, timeout: float) -> tuple[Job | None, list[Send]]:
        queue, taken = P + "queue", P + "taken:" + self.me   # timeout 0 (the live lane has work): no wait at all
        run_id = self.r.blmove(queue, taken, max(0.05, timeout), "LEFT", "RIGHT") if timeout else self.r.lmove(queue, taken)
        if run_id is None:
            return None, []
        fields = self.r.hgetall(P + "job:" + run_id)
        if fields.get("status") != RunStatus.QUEUED:   # ended while it waited
            self.r.lrem(P + "taken:" + self.me, 1, run_id)
            return None, []
        self.r.hset(P + "job:" + run_id, mapping={"status": RunStatus.RUNNING, "worker": self.me})
        return Job.from_dict(json.loads(fields["job"])), self._positions()

    def wake(self) -> None:
        """Nothing: a `take` waits in BLMOVE for at most its timeout (fractional seconds) and then looks again."""

    def publish(self, job: Job, event: str, payload: dict) -> Send:
        seq = self.r.rpush(P + "log:" + job.run_id, json.dumps([str(event), payload]))
        return Send(event, {**payload, "seq": seq}, job.run_id)

    def set_progress(self, job: Job, fraction: float) -> None:
        self.r.hset(P + "job:" + job.run_id, "progress", fraction)  # sweep_progress is not logged

    def stop_reason(self, job: Job) -> str | None:
        if reason := self.r.hget(P + "job:" + job.run_id, "cancel"):   # who asked: its submitter, or its teacher
            return reason
        return "its submitter left and nobody watched it" if self._orphaned(job.run_id) else None

    def housekeeping(self) -> list[Send]:
        """Cancel queued runs nobody watched for the grace period; end the runs of engine workers that died."""
        sends, moved = [], False
        for run_id in self.r.lrange(P + "queue", 0, -1):
            if self._orphaned(run_id) and self.r.lrem(P + "queue", 1, run_id):
                job, moved = self._job(run_id), True
                sends += self._end(job, RunStatus.CANCELLED, "its submitter left and nobody watched it")
        for worker in () if self.quiet else self.r.smembers(P + "workers"):
            if self.r.exists(P + "worker:" + worker):
                continue
            for run_id in self.r.lrange(P + "taken:" + worker, 0, -1):
                if self.r.lrem(P + "taken:" + worker, 1, run_id):
                    sends += self._end(self._job(run_id), RunStatus.FAILED, "the engine worker running it stopped")
            self.r.srem(P + "workers", worker)
        return sends + (self._positions() if moved else [])

    def end(self, job: Job, status: RunStatus, reason: str) -> list[Send]:
        self.r.lrem(P + "taken:" + self.me, 1, job.run_id)
        return self._end(job, status, reason)

    def finish(self, job: Job, stored: bool) -> None:
        self._retire(job, RunStatus.FINISHED)
        self.r.expire(P + "log:" + job.run_id, 60 if stored else RECENT_S)  # a late watcher on another process
        self.r.lrem(P + "taken:" + self.me, 1, job.run_id)

    # -- rules ----------------------------------------------------------------------------------------
    def _count_watcher(self, sid: str, run_id: str) -> None:
        if run_id not in self.watching.setdefault(sid, set()):
            self.watching[sid].add(run_id)
            self.r.hincrby(P + "watchers:" + run_id, self.me, 1)
            self.r.hdel(P + "job:" + run_id, "orphaned_at")

    def _orphaned(self, run_id: str) -> bool:
        """Whether no live web process has watched `run_id` for the grace period (starts the period if none does)."""
        if self.quiet:
            return False
        counts = self.r.hgetall(P + "watchers:" + run_id)
        if any(int(n) > 0 and self.r.exists(P + "web:" + web) for web, n in counts.items()):
            self.r.hdel(P + "job:" + run_id, "orphaned_at")
            return False
        self.r.hsetnx(P + "job:" + run_id, "orphaned_at", time.time())
        return time.time() - float(self.r.hget(P + "job:" + run_id, "orphaned_at") or time.time()) >= self.grace_s

    def _job(self, run_id: str) -> Job:
        return Job.from_dict(json.loads(self.r.hget(P + "job:" + run_id, "job")))

    def _log(self, run_id: str, after: int = 0) -> list[tuple[str, dict]]:
        """The run's logged events after the first `after`, each with its `seq`."""
        log = (json.loads(item) for item in self.r.lrange(P + "log:" + run_id, after, -1))
        return [(event, {**payload, "seq": after + i + 1}) for i, (event, payload) in enumerate(log)]

    def _positions(self) -> list[Send]:
        queued = self.queued_jobs()
        return [Send(Event.RUN_QUEUED, position_payload(queued, i), job.run_id) for i, job in enumerate(queued)]

    def _end(self, job: Job, status: RunStatus, reason: str) -> list[Send]:
        self.r.hset(P + "job:" + job.run_id, "error", reason)
        self._retire(job, status)
        send = self.publish(job, Event.RUN_ERROR, ended_payload(job.run_id, status, reason))
        self.r.expire(P + "log:" + job.run_id, 60)   # nobody can replay a run that did not finish
        return [send]

    def _retire(self, job: Job, status: RunStatus) -> None:
        self.r.hset(P + "job:" + job.run_id, "status", status)
        if job.sid is not None and self.r.hget(P + "active", job.sid) == job.run_id:
            self.r.hdel(P + "active", job.sid)
        for key in ("job:", "watchers:"):
            self.r.expire(P + key + job.run_id, RECENT_S)
