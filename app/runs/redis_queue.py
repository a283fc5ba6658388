"""The Redis book's queue writes that follow app.runs.queue_order: read the queued jobs, and put a job where the
order says, atomically against engine workers taking from the queue at the same moment (WATCH, then MULTI).
This module knows redis-py and jobs, nothing of sockets or the engine.
"""
import json

import redis

from ..protocol import RunStatus
from .job import Job
from .queue_order import insert_index


def jobs_of(r, prefix: str, run_ids: list[str]) -> list[Job]:
    """The jobs of `run_ids` (in order), read from their `<prefix>job:<id>` hashes; a missing one is left out."""
    found = (r.hget(prefix + "job:" + run_id, "job") for run_id in run_ids)
    return [Job.from_dict(json.loads(text)) for text in found if text]


def running_jobs(r, prefix: str) -> list[Job]:
    """The jobs engine workers are executing now: every worker's `<prefix>taken:<worker>` list, still running."""
    run_ids = [run_id for taken in r.scan_iter(match=prefix + "taken:*") for run_id in r.lrange(taken, 0, -1)]
    return [job for job in jobs_of(r, prefix, run_ids) if r.hget(prefix + "job:" + job.run_id, "status") == RunStatus.RUNNING]


def enqueue(r: redis.Redis, prefix: str, job: Job) -> bool:
    """Put `job.run_id` into the list `<prefix>queue` where queue_order says; True when it went to the end."""
    queue = prefix + "queue"
    with r.pipeline() as pipe:
        while True:
            try:
                pipe.watch(queue)
                queued = jobs_of(pipe, prefix, pipe.lrange(queue, 0, -1))
                at = insert_index(queued, job)
                pipe.multi()
                if at < len(queued):
                    pipe.linsert(queue, "BEFORE", queued[at].run_id, job.run_id)
                else:
                    pipe.rpush(queue, job.run_id)
                pipe.execute()
                return at == len(queued)
            except redis.WatchError:
                continue                  # the queue moved meanwhile (a worker took a job): read it again
