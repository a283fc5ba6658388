"""Rate limits per client: at most `limit` events in any sliding window of `window_s` seconds.

`RateLimiter` counts in this process's memory; `RedisRateLimiter` counts in Redis, so that a client's budget
is the same on every web process. A client is the id its page sends on connect (kept across reconnects to
any web process), else its socket id. This module knows clocks and Redis, nothing of events.
"""
import threading
import time
from collections import deque

import redis


class RateLimiter:
    def __init__(self, limit: int, window_s: float = 60.0):
        self.limit, self.window_s = limit, window_s
        self.times: dict[str, deque[float]] = {}
        self.lock = threading.Lock()

    def allow(self, client: str) -> bool:
        now = time.monotonic()
        with self.lock:
            times = self.times.setdefault(client, deque())
            while times and now - times[0] >= self.window_s:
                times.popleft()
            if len(times) >= self.limit:
                return False
            times.append(now)
            return True

    def forget(self, client: str) -> None:
        with self.lock:
            self.times.pop(client, None)


class RedisRateLimiter:
    """The same window in a Redis sorted set per client (`batch-lanes:rate:<name>:<client>`), expiring with it."""

    def __init__(self, client: redis.Redis, name: str, limit: int, window_s: float = 60.0):
        self.r, self.name, self.limit, self.window_s = client, name, limit, window_s

    def allow(self, client: str) -> bool:
        key, now = f"batch-lanes:rate:{self.name}:{client}", time.time()
        try:
            with self.r.pipeline() as pipe:  # one round trip: drop the times out of the window, count the rest
                count = pipe.zremrangebyscore(key, 0, now - self.window_s).zcard(key).execute()[1]
            if count >= self.limit:
                return False
            self.r.zadd(key, {f"{now!r}": now})
            self.r.expire(key, int(self.window_s) + 1)
        except redis.RedisError:
            return True  # Redis down: the call that follows says so; rate limits are not the place
        return True

    def forget(self, client: str) -> None:
        """Nothing: a client's budget outlives its socket, so a reconnect does not reset it."""
