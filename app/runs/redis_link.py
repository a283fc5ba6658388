"""How every process of a deployment reaches its Redis: one checked client, the pub/sub channel they share,
and the loop of background chores (heartbeats, housekeeping, token counts) that keeps trying while Redis is
down. The web factory (app.web.factory) and the engine worker process (app.engine_worker) both import it.
This module knows redis-py, nothing of runs, sockets or the engine.
"""
import logging

import redis

log = logging.getLogger("batch_lanes")
CHANNEL = "batch-lanes"  # the Redis pub/sub channel of every process of one deployment
MAX_CONNECTIONS = 64     # Redis connections one process opens at most; more callers wait their turn


class QueueUnreachable(RuntimeError):
    """Redis could not be reached when the process started; the message says where and what to do."""


def connect_redis(url: str, decode: bool = True) -> redis.Redis:
    """A Redis client for `url`, checked with one PING (QueueUnreachable after ~3 s, never a hang)."""
    # A blocking pool: a burst of handlers (a class of spectators joining at once) waits for a connection rather
    # than failing with MaxConnectionsError, as redis-py's default pool of 100 does.
    pool = redis.BlockingConnectionPool.from_url(url, max_connections=MAX_CONNECTIONS, timeout=10,
                                                 decode_responses=decode, socket_connect_timeout=3, socket_timeout=10,
                                                 health_check_interval=15, retry_on_timeout=True)
    client = redis.Redis(connection_pool=pool)
    try:
        client.ping()
    except (redis.RedisError, ValueError) as e:
        raise QueueUnreachable(f"cannot reach Redis at {url}: {e}. Start it (e.g. `redis-server --port 6379`) "
                               f"or fix --message-queue") from None
    return client


def every(seconds: float, chore, sleep, what: str, stopped=lambda: False, backoff_s: float = 0.0) -> None:
    """Run `chore()` every `seconds` until `stopped()`; while Redis is unreachable, say so once, wait `backoff_s`
    more each time, and keep trying (every process's background chores: heartbeats, housekeeping, token counts)."""
    down = False
    while not stopped():
        try:
            chore()
            if down:
                log.info("%s: Redis is reachable again", what)
            down = False
        except redis.RedisError as e:
            if not down:
                log.warning("%s: Redis unreachable, retrying: %s", what, e)
            down = True
            sleep(backoff_s)
        sleep(seconds)
