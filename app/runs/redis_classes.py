"""The classes of a deployment of several web processes, kept in Redis: a student on any web process joins a class
a teacher opened on another, and every process tags its sockets' submits with it.

Same rules and answers as app.runs.classes.Classes (it is that class): only where the classes live differs.
Each call holds a Redis lock, reads every class from the hash below, applies the rule, and writes back what
changed. Which class a socket is in stays in the memory of the process that holds the socket; sends to a class's
students' room reach every process (the Redis client manager).

    batch-lanes:classes        hash: code -> the class as JSON (token, teacher socket, students' sockets, its poll, ...)
    batch-lanes:classes:lock   the lock every change holds

This module knows redis-py and the class record, nothing of Flask or the engine.
"""
import json
from contextlib import contextmanager
from dataclasses import asdict

import redis

from ..protocol import Rejected
from .classes import Classes, Klass
from .polls import Poll

KEY = "batch-lanes:classes"


def _dump(klass: Klass) -> str:
    record = asdict(klass)
    record.pop("sent")
    record["students"] = sorted(klass.students)
    return json.dumps(record, sort_keys=True)


def _load(text: str) -> Klass:
    record = json.loads(text)
    poll = record.get("poll")   # its answers ride with it: nothing of a poll is kept apart from its class
    return Klass(**{**record, "students": set(record["students"]), "poll": Poll(**poll) if poll else None})


class RedisClasses(Classes):
    def __init__(self, client: redis.Redis, grace_s: float, max_classes: int, max_students: int):
        super().__init__(grace_s, max_classes, max_students)
        self.r = client
        self.sent: dict[str, dict] = {}     # code -> the teacher's state this process last sent

    @contextmanager
    def _locked(self):
        try:
            with self.lock, self.r.lock(KEY + ":lock", timeout=10, blocking_timeout=10):
                yield from self._held()
        except redis.RedisError as e:
            raise Rejected("unavailable", f"the classes (Redis) are unreachable, try again in a moment: "
                                          f"{type(e).__name__}") from None

    def _held(self):
        """Read every class, let the rule run (the `yield`), write back what changed."""
        before = self.r.hgetall(KEY)
        self.classes = {code: _load(text) for code, text in before.items()}
        for code, klass in self.classes.items():
            klass.sent = self.sent.get(code)
        yield
        after = {code: _dump(klass) for code, klass in self.classes.items()}
        pipe = self.r.pipeline()
        for code in set(before) - set(after):
            pipe.hdel(KEY, code)
        for code, text in after.items():
            if before.get(code) != text:
                pipe.hset(KEY, code, text)
        pipe.execute()
        self.sent = {code: klass.sent for code, klass in self.classes.items() if klass.sent is not None}

    def __len__(self) -> int:
        try:
            return self.r.hlen(KEY)
        except redis.RedisError:
            return 1          # unknown while Redis is down: the chores keep trying


def classes_for(client: redis.Redis | None, grace_s: float, max_classes: int, max_students: int) -> Classes:
    """This process's classes: in memory, or in Redis when web processes share one."""
    if client is None:
        return Classes(grace_s, max_classes, max_students)
    return RedisClasses(client, grace_s, max_classes, max_students)

