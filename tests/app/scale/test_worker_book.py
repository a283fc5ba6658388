"""The engine worker's run book (app.runs.worker_book) on a real redis-server: a running run's events wait in its
outbox while Redis is away and are written back whole when Redis comes back empty; housekeeping of runs it does
not hold (a dead worker's) is logged and sent like a web process's."""
import json

import pytest
import redis

from app.protocol import RunStatus
from app.runs.job import Job
from app.runs.redis_book import P
from app.runs.worker_book import WorkerBook
from tests.kit.scale import Deployment

pytestmark = pytest.mark.redis


@pytest.fixture
def deployment(tmp_path):
    d = Deployment(tmp_path)
    d.start_redis()
    yield d
    d.stop()


def client(d) -> redis.Redis:
    return redis.Redis(port=d.redis_port, decode_responses=True, socket_connect_timeout=1)


def test_a_dead_workers_run_ended_by_another_workers_housekeeping_gets_its_run_error(deployment):
    r = client(deployment)
    job = Job("run", {"workload": {}}, "sid-1", ["static"])
    r.hset(P + "job:" + job.run_id, mapping={"job": json.dumps(job.to_dict()), "status": RunStatus.RUNNING})
    r.rpush(P + "taken:worker-dead", job.run_id)
    r.sadd(P + "workers", "worker-dead")                  # in the set, its heartbeat long gone
    sends = WorkerBook(r, "worker-me", 8, 5.0).housekeeping()
    assert [(s.event, s.payload["seq"], s.to) for s in sends] == [("run_error", 1, job.run_id)]
    assert "engine worker running it stopped" in json.loads(r.lindex(P + "log:" + job.run_id, 0))[1]["message"]


def test_events_wait_while_redis_is_away_and_the_run_is_written_back_when_it_returns_empty(deployment):
    book = WorkerBook(client(deployment), "worker-me", 8, 5.0)
    job = Job("run", {"workload": {}}, "sid-1", ["static"])
    book.r.hset(P + "job:" + job.run_id, mapping={"job": json.dumps(job.to_dict()), "status": RunStatus.QUEUED})
    book.r.rpush(P + "queue", job.run_id)
    taken, _ = book.take(timeout=1)
    assert taken.run_id == job.run_id
    assert book.publish(job, "tick", {"run_id": job.run_id, "t": 1}).payload["seq"] == 1
    deployment.redis_proc.kill()
    deployment.redis_proc.wait()
    assert book.publish(job, "tick", {"run_id": job.run_id, "t": 2}) is None     # kept: Redis is away
    assert book.stop_reason(job) is None                                           # and the run goes on
    deployment.start_redis()                                                       # back, empty
    assert book.publish(job, "tick", {"run_id": job.run_id, "t": 3}).payload["seq"] == 3
    r = client(deployment)
    log = [json.loads(item) for item in r.lrange(P + "log:" + job.run_id, 0, -1)]
    assert [payload["t"] for _, payload in log] == [1, 2, 3]
    assert r.hget(P + "job:" + job.run_id, "status") == RunStatus.RUNNING
    assert r.lrange(P + "taken:worker-me", 0, -1) == [job.run_id]
    book.finish(job, stored=True)
    assert r.hget(P + "job:" + job.run_id, "status") == RunStatus.FINISHED and not r.llen(P + "taken:worker-me")
