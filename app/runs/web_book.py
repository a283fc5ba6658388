"""The run book as a web process uses it: `RedisBook` plus what a web process does at every heartbeat so that
a Redis restart loses nobody's watch and leaves nobody waiting in silence.

`recount` writes this process's count of watchers of every live run it watches (a HSET, idempotent: after Redis
restarted empty the counts are back within one beat, before any run could be called orphaned), forgets the runs
that ended, and tells the watchers of a run Redis no longer knows (missing at two beats in a row: a running run's
engine worker writes it back within a tick, app.runs.worker_book) that it is lost, with a `run_error`.
`log_after` is what the fan-out (app.runs.fanout.RedisFanout) reads a run's log with.
This module knows Redis and jobs, nothing of sockets or torch.
"""
import logging

from ..protocol import Event, RunStatus, Send, ended_payload
from .redis_book import P, RedisBook

log = logging.getLogger("batch_lanes.redis_book")
LOST = "Redis restarted without its data and lost it; submit it again"


class WebBook(RedisBook):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.missing: set[str] = set()   # watched runs Redis did not know at the last recount

    def log_after(self, run_id: str, after: int) -> list[tuple[str, dict]]:
        """The run's logged events past the first `after`, numbered (RedisError if Redis is unreachable)."""
        return self._log(run_id, after)

    def recount(self) -> list[Send]:
        """Rewrite this process's watcher counts; `run_error` to this process's watchers of runs Redis lost."""
        counts: dict[str, int] = {}
        for runs in list(self.watching.values()):
            for run_id in list(runs):
                counts[run_id] = counts.get(run_id, 0) + 1
        if not counts:
            return []
        pipe = self.r.pipeline(transaction=False)
        for run_id in counts:
            pipe.hget(P + "job:" + run_id, "status")
        statuses = dict(zip(counts, pipe.execute()))
        pipe = self.r.pipeline(transaction=False)
        for run_id, status in statuses.items():
            if status in (RunStatus.QUEUED, RunStatus.RUNNING):
                pipe.hset(P + "watchers:" + run_id, self.me, counts[run_id])
        pipe.execute()
        gone = {run_id for run_id, status in statuses.items() if status is not None and not RunStatus(status).is_live}
        lost = {run_id for run_id, status in statuses.items() if status is None and run_id in self.missing}
        self.missing = {run_id for run_id, status in statuses.items() if status is None} - lost
        for runs in list(self.watching.values()):
            runs -= gone | lost
        for run_id in lost:
            log.warning("run %s: %s", run_id, LOST)
        return [Send(Event.RUN_ERROR, ended_payload(run_id, RunStatus.FAILED, LOST), run_id, local=True)
                for run_id in sorted(lost)]
