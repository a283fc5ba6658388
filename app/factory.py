"""The application factory: `create_app(config=None, engine=None)`.

One process (the default): the run book lives in memory and an engine worker thread in this process owns
the model (loaded unless `engine` is given, e.g. `Engine(None)` for the simulator or a test's loaded model).
With `MESSAGE_QUEUE` (redis://...): a web process of several. The run book lives in Redis, the engine
workers are other processes (`python -m app.engine_worker`), events reach this process's sockets through
Redis, and this process never imports torch. HTTP lives in `routes.py`, socket handlers in `events.py`;
`extensions.DEFAULTS` lists every config key.
"""
import logging
import os
import secrets
import uuid
from pathlib import Path

import redis
from flask import Flask

from . import events, openai_api, routes  # noqa: F401  (events registers its handlers on `socketio`)
from .book import MemoryBook
from .extensions import DEFAULTS, ROOT, SERVER_LIMITS, socketio  # noqa: F401  (DEFAULTS, SERVER_LIMITS re-exported)
from .fanout import LocalFanout, RedisFanout, deliver
from .live import LiveGateway
from .protocol import WirePacket
from .prom import LiveMetrics
from .ratelimit import RateLimiter, RedisRateLimiter
from .redis_book import HEARTBEAT_S, RedisBook
from .runs import Runs
from .store import RedisRunStore, RunStore

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


def create_app(config: dict | None = None, engine=None) -> Flask:
    """The app and its socket server; in one process also a running engine worker (`app.extensions["worker"]`,
    stop it with `.stop()`). QueueUnreachable if a message queue is configured and Redis does not answer."""
    app = Flask(__name__, template_folder=str(ROOT / "templates"), static_folder=str(ROOT / "static"))
    app.config.update(DEFAULTS)
    app.config["SECRET_KEY"] = os.environ.get("BATCH_LANES_SECRET_KEY") or secrets.token_hex(32)
    app.config.update(config or {})
    data_dir = app.config["DATA_DIR"] or os.environ.get("BATCH_LANES_DATA") or ROOT / "data"
    app.config["DATA_DIR"] = Path(data_dir)
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_MESSAGE_BYTES"]  # HTTP bodies (POST /api/generate) too
    url = app.config["MESSAGE_QUEUE"]
    client = connect_redis(url) if url else None
    manager = RedisFanout(url, channel=CHANNEL) if url else LocalFanout()

    # Same-origin only: no cors_allowed_origins, so engine.io accepts just this host's own pages.
    socketio.init_app(app, async_mode=app.config["ASYNC_MODE"], client_manager=manager,
                      max_http_buffer_size=app.config["MAX_MESSAGE_BYTES"], serializer=WirePacket,
                      logger=False, engineio_logger=False)
    server = socketio.server
    app.register_blueprint(routes.bp)
    store = open_store(app.config, url)
    app.extensions["store"] = store
    if client is None:
        _one_process(app, server, store, engine)
    else:
        _web_process(app, server, store, client)
    return app


def open_store(config: dict, url: str | None):
    if config["STORE"] == "redis":
        if not url:
            raise ValueError("--store redis needs --message-queue redis://...")
        return RedisRunStore(connect_redis(url, decode=False))
    return RunStore(Path(config["DATA_DIR"]) / "runs.sqlite3")


def _one_process(app: Flask, server, store, engine) -> None:
    from engine import Engine  # torch: only where the model is
    from .worker import EngineWorker

    config = app.config
    if engine is None and config["BACKEND"] == "sim":
        engine = Engine(None, config["LIMITS"])
    book = MemoryBook(config["MAX_QUEUED_RUNS"], config["CANCEL_GRACE_S"], config["RECENT_RUNS"])
    worker = EngineWorker(book, lambda sends: deliver(server, sends), store, config, engine,
                          start_task=server.start_background_task, sleep=server.sleep)
    metrics = LiveMetrics()
    live = LiveGateway(worker, config["LIVE_MAX_WAITING"], metrics)
    worker.on_live_step = live.after_step
    app.register_blueprint(openai_api.bp)
    app.extensions.update(book=book, worker=worker, runs=Runs(book, store, server, config["LIMITS"], worker=worker),
                          live=live, metrics=metrics,
                          rate_limits={"submit": RateLimiter(config["SUBMITS_PER_MINUTE"]),
                                       "watch": RateLimiter(config["WATCHES_PER_MINUTE"])})
    worker.start()


def _web_process(app: Flask, server, store, client: redis.Redis) -> None:
    config = app.config
    book = RedisBook(client, f"web-{uuid.uuid4().hex[:8]}", config["MAX_QUEUED_RUNS"], config["CANCEL_GRACE_S"])
    app.register_blueprint(openai_api.unavailable_bp)
    app.extensions.update(book=book, worker=None, live=None, metrics=None,
                          runs=Runs(book, store, server, config["LIMITS"], redis_client=client),
                          rate_limits={"submit": RedisRateLimiter(client, "submit", config["SUBMITS_PER_MINUTE"]),
                                       "watch": RedisRateLimiter(client, "watch", config["WATCHES_PER_MINUTE"])})
    book.beat_web()
    server.start_background_task(_keep_house, book, server)
    log.info("web process %s on the run queue at %s", book.me, config["MESSAGE_QUEUE"])


def _keep_house(book: RedisBook, server) -> None:
    """A web process's chores, every HEARTBEAT_S: say it is alive (its sockets' watches count while it is),
    cancel queued runs nobody watches, end the runs of engine workers that died."""
    def chores() -> None:
        book.beat_web()
        deliver(server, book.housekeeping())
    every(HEARTBEAT_S, chores, server.sleep, "housekeeping")


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
