"""The run book as an engine worker uses it (app.engine_worker): `RedisBook` plus an outbox per running job, so
that a run goes on while Redis is away and nothing it said is lost.

Every event of a running job is kept here first (`Outbox.log`, seq = index + 1) and pushed to the run's log in
Redis as soon as Redis takes it. While Redis is unreachable the run keeps stepping and its events wait; the
first push after Redis is back sends them all. If Redis came back empty (restarted without persistence), the
push sees a log shorter than it should be and writes the run back whole: its log, its job hash, its place on
this worker's taken list. A live event is handed to pub/sub only once the log holds it and all before it, so a
web process that gets `seq` n from pub/sub can always read 1..n from the log (app.runs.fanout). Ending a job
(`end`, `finish`) waits for Redis, however long, unless the worker is stopping. Questions that may fail
(`stop_reason`, `set_progress`) answer "go on" while Redis is away.
This module knows Redis and jobs, nothing of sockets or torch.
"""
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Callable

import redis

from ..protocol import Event, RunStatus, Send, ended_payload
from .job import Job
from .redis_book import P, RedisBook

log = logging.getLogger("batch_lanes.worker")
RETRY_S = 1.0   # how often a job's end is retried while Redis is unreachable


@dataclass(eq=False)
class Outbox:
    job: Job
    log: list[str] = field(default_factory=list)  # every event of the job as logged ([event, payload] JSON)
    pushed: int = 0                               # how many of them Redis's log holds, as far as we know


class WorkerBook(RedisBook):
    def __init__(self, client: redis.Redis, me: str, max_queued: int, grace_s: float,
                 stopped: Callable[[], bool] = lambda: False, sleep: Callable[[float], None] = time.sleep):
        super().__init__(client, me, max_queued, grace_s)
        self.status: dict = {}            # this worker's model status: its heartbeat's content
        self.stopped, self.sleep = stopped, sleep
        self.outboxes: dict[str, Outbox] = {}
        self.away = False                 # the last push failed (said once in the log, and once when back)

    def set_model_status(self, status: dict) -> None:
        self.status = dict(status)
        try:
            self.beat_worker(self.status)
        except redis.RedisError as e:
            log.warning("could not publish the model status: %s", e)

    # -- a job's life ------------------------------------------------------------------------------------
    def take(self, timeout: float) -> tuple[Job | None, list[Send]]:
        job, sends = super().take(timeout)
        if job is not None:
            self.outboxes[job.run_id] = Outbox(job)
        return job, sends

    def publish(self, job: Job, event: str, payload: dict) -> Send | None:
        """Keep the event, push what Redis lacks; the numbered event to send, or None while Redis is away. A run
        this worker does not hold (housekeeping ending another's) is logged straight, as a web process does."""
        box = self.outboxes.get(job.run_id)
        if box is None:
            return super().publish(job, event, payload)
        box.log.append(json.dumps([str(event), payload]))
        send = Send(event, {**payload, "seq": len(box.log)}, job.run_id)
        return send if self._push(box) else None

    def stop_reason(self, job: Job) -> str | None:
        try:
            return super().stop_reason(job)
        except redis.RedisError:
            return None                   # Redis away: nobody can have cancelled it, nobody can be counted

    def paused_since(self, job: Job) -> float | None:
        """When its class's teacher paused `job` (RedisBook.pause keeps it in the job's hash), or None."""
        try:
            return float(since) if (since := self.r.hget(P + "job:" + job.run_id, "paused")) else None
        except redis.RedisError:
            return None                   # Redis away: the run goes on; a pause still set is read when it is back

    def serve_token_counts(self, count) -> None:
        """Answer one token-count question if one comes within a second (an engine worker's helper thread)."""
        ask = self.r.blpop([P + "rpc"], timeout=1)
        if ask is not None:
            ask = json.loads(ask[1])
            self.r.lpush(P + "reply:" + ask["id"], json.dumps(count(ask["prompts"])))
            self.r.expire(P + "reply:" + ask["id"], 30)

    def set_progress(self, job: Job, fraction: float) -> None:
        try:
            super().set_progress(job, fraction)
        except redis.RedisError:
            pass                          # a sweep's progress is only for a late watcher; the next one tells

    def end(self, job: Job, status: RunStatus, reason: str) -> list[Send]:
        """Tell the job's room why it ended (once, into the outbox), then Redis, when it answers."""
        box = self.outboxes.setdefault(job.run_id, Outbox(job))
        payload = ended_payload(job.run_id, status, reason)
        send = self.publish(job, Event.RUN_ERROR, payload)

        def settle():
            self._push(box, strict=True)
            self.r.hset(P + "job:" + job.run_id, "error", reason)
            self._retire(job, status)
            self.r.expire(P + "log:" + job.run_id, 60)   # nobody can replay a run that did not finish
            self.r.lrem(P + "taken:" + self.me, 1, job.run_id)
        self._until_heard(settle, job)
        self.outboxes.pop(job.run_id, None)
        return [send or Send(Event.RUN_ERROR, {**payload, "seq": len(box.log)}, job.run_id)]

    def finish(self, job: Job, stored: bool) -> None:
        box = self.outboxes[job.run_id]

        def settle():
            self._push(box, strict=True)
            RedisBook.finish(self, job, stored)
        self._until_heard(settle, job)
        self.outboxes.pop(job.run_id, None)

    # -- Redis away and back ----------------------------------------------------------------------------
    def _push(self, box: Outbox, strict: bool = False) -> bool:
        """Push the events Redis's log lacks; write the run back whole if Redis lost it. False (or, `strict`, the
        RedisError) while Redis is unreachable."""
        try:
            pending = box.log[box.pushed:]
            if pending:
                length = self.r.rpush(P + "log:" + box.job.run_id, *pending)
                if length < len(box.log):  # Redis lost the log (restarted empty, or lost its last writes)
                    self._restore(box)
                box.pushed = len(box.log)
        except redis.RedisError as e:
            if not self.away:
                log.warning("Redis unreachable: run %s goes on, its events wait here (%d so far): %s",
                            box.job.run_id, len(box.log) - box.pushed, e)
            self.away = True
            if strict:
                raise
            return False
        if self.away:
            log.info("Redis is back: run %s's log is complete again (%d events)", box.job.run_id, len(box.log))
        self.away = False
        return True

    def _restore(self, box: Outbox) -> None:
        """Redis forgot the run: its log, its job (running here) and this worker's hold on it, written back at once."""
        run_id = box.job.run_id
        log.warning("Redis lost run %s's state (restarted without persistence?): writing it back", run_id)
        pipe = self.r.pipeline(transaction=True)
        pipe.delete(P + "log:" + run_id).rpush(P + "log:" + run_id, *box.log)
        pipe.hset(P + "job:" + run_id, mapping={"job": json.dumps(box.job.to_dict()), "status": RunStatus.RUNNING,
                                               "worker": self.me})
        pipe.lrem(P + "taken:" + self.me, 0, run_id).rpush(P + "taken:" + self.me, run_id)
        pipe.execute()
        self.trust_from = max(self.trust_from, time.monotonic() + self.grace_s + 4.0)  # watchers are counted again

    def _until_heard(self, settle: Callable[[], None], job: Job) -> None:
        """Call `settle` until Redis takes it (every RETRY_S), unless the worker is stopping."""
        while True:
            try:
                settle()
                return
            except redis.RedisError as e:
                if self.stopped():
                    log.error("run %s: Redis unreachable while stopping, its end is not recorded: %s", job.run_id, e)
                    return
                self.sleep(RETRY_S)
