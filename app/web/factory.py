"""The application factory: `create_app(config=None, engine=None)`.

One process (the default): the run book lives in memory and an engine worker thread in this process owns
the model (loaded unless `engine` is given, e.g. `Engine(None)` for the simulator or a test's loaded model).
With `MESSAGE_QUEUE` (redis://...): a web process of several. The run book lives in Redis, the engine
workers are other processes (`python -m app.engine_worker`), events reach this process's sockets through
Redis, and this process never imports torch: nothing at the top of this module or of what it imports does
(tests/app/test_app_imports.py holds it to that); the one-process wiring imports the engine inside
`_one_process`. HTTP lives in `routes.py`, socket handlers in `events.py`; `app.settings.DEFAULTS` lists
every config key.
"""
import logging
import os
import secrets
import time
import uuid
from pathlib import Path

import redis
from flask import Flask

from ..live.gateway import LiveGateway
from ..live.prom import LiveMetrics
from ..live.remote import RemoteGateway
from ..live.remote_metrics import RemoteMetrics
from ..live.stats import StatsLine
from ..runs.fanout import CATCH_UP_S, LocalFanout, RedisFanout, deliver
from ..runs.memory_book import MemoryBook
from ..runs.redis_book import HEARTBEAT_S
from ..runs.web_book import WebBook
from ..runs.redis_link import CHANNEL, connect_redis, every
from ..runs.service import Runs
from ..runs.store import open_store
from ..settings import DEFAULTS, ROOT
from . import access, bodies, requestlog, class_events, events, openai_api, references, routes, serving, tracing  # noqa: F401  (they register handlers on `socketio`)
from .extensions import socketio
from .frames import CheckedPacket
from .ratelimit import RateLimiter, RedisRateLimiter

log = logging.getLogger("batch_lanes")


def create_app(config: dict | None = None, engine=None) -> Flask:
    """The app and its socket server; in one process also a running engine worker (`app.extensions["worker"]`,
    stop it with `.stop()`). QueueUnreachable if a message queue is configured and Redis does not answer."""
    app = Flask(__name__, template_folder=str(ROOT / "templates"), static_folder=str(ROOT / "static"))
    app.config.update(DEFAULTS)
    app.config["SECRET_KEY"] = os.environ.get("BATCH_LANES_SECRET_KEY") or secrets.token_hex(32)
    app.config.update(config or {})
    app.config["STARTED_AT"] = app.config["STARTED_AT"] or int(time.time())
    data_dir = app.config["DATA_DIR"] or os.environ.get("BATCH_LANES_DATA") or ROOT / "data"
    app.config["DATA_DIR"] = Path(data_dir)
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_MESSAGE_BYTES"]  # HTTP bodies (POST /api/generate) too
    app.config["PUBLIC_URL"] = app.config["PUBLIC_URL"] or os.environ.get("BATCH_LANES_PUBLIC_URL") or None
    url = app.config["MESSAGE_QUEUE"]
    client = connect_redis(url) if url else None
    manager = RedisFanout(url, channel=CHANNEL) if url else LocalFanout()

    # Same-origin only: no cors_allowed_origins, so engine.io accepts just this host's own pages.
    socketio.init_app(app, async_mode=app.config["ASYNC_MODE"], client_manager=manager,
                      max_http_buffer_size=app.config["MAX_MESSAGE_BYTES"], serializer=CheckedPacket,
                      logger=False, engineio_logger=False)
    server = socketio.server
    app.register_blueprint(routes.bp)
    app.register_blueprint(references.bp)  # reference runs (app/web/references.py)
    app.register_blueprint(serving.bp)     # /health, /version, /tokenize, /detokenize, /v1/models/{id}
    requestlog.register(app)   # X-Request-Id, an access log line per request
    tracing.init_app(app)      # an OpenTelemetry span per completion request, where an OTLP endpoint is configured
    access.register(app)   # --api-key and --allowed-origins on /v1, /tokenize, /detokenize
    bodies.register(app)   # a JSON body too deep or holding a lone surrogate: a 400 naming where
    store = open_store(app.config, url)
    app.extensions["store"] = store
    _check_storage(app, store)
    if client is None:
        _one_process(app, server, store, engine)
    else:
        _web_process(app, server, store, client)
    class_events.init_app(app)
    return app


def _check_storage(app: Flask, store) -> None:
    """Say at start if runs cannot be saved (a read-only or full --data), and on every page (_model_status.html)."""
    health = store.health()
    if not health["ok"]:
        log.error("storage: %s; runs will run, but their links will not survive a restart", health["error"])
    app.context_processor(lambda: {"storage": store.health()})


def _one_process(app: Flask, server, store, engine) -> None:
    from engine import Engine  # torch: only where the model is
    from ..runs.worker import EngineWorker

    config = app.config
    if engine is None and config["BACKEND"] == "sim":
        engine = Engine(None, config["LIMITS"])
    book = MemoryBook(config["MAX_QUEUED_RUNS"], config["CANCEL_GRACE_S"], config["RECENT_RUNS"], config["MAX_CLASS_QUEUED"])
    worker = EngineWorker(book, lambda sends: deliver(server, sends), store, config, engine,
                          start_task=server.start_background_task, sleep=server.sleep)
    metrics = LiveMetrics(config["METRICS_PREFIX"], config["LIMITS"].max_prompt_tokens + config["LIMITS"].max_new_tokens)
    live = LiveGateway(worker.live, config["LIVE_MAX_WAITING"], metrics)
    worker.on_live_step = live.after_step
    server.start_background_task(StatsLine(metrics).run, server.sleep, worker.stopping)   # every 10 s while busy
    app.register_blueprint(openai_api.bp)
    app.extensions.update(book=book, worker=worker, runs=Runs(book, store, server, config["LIMITS"], worker=worker),
                          live=live, metrics=metrics,
                          rate_limits={"submit": RateLimiter(config["SUBMITS_PER_MINUTE"]),
                                       "watch": RateLimiter(config["WATCHES_PER_MINUTE"])})
    worker.start()


def _web_process(app: Flask, server, store, client: redis.Redis) -> None:
    config = app.config
    book = WebBook(client, f"web-{uuid.uuid4().hex[:8]}", config["MAX_QUEUED_RUNS"], config["CANCEL_GRACE_S"],
                   config["MAX_CLASS_QUEUED"])
    server.manager.read_log = book.log_after   # the fan-out fills what pub/sub dropped from the runs' logs
    app.register_blueprint(openai_api.bp)   # served by the engine workers' live lanes (app.live.remote)
    live = RemoteGateway(config["MESSAGE_QUEUE"], config["LIVE_MAX_WAITING"])
    metrics = RemoteMetrics(live.lane, config["METRICS_PREFIX"])
    app.extensions.update(book=book, worker=None, live=live, metrics=metrics,
                          runs=Runs(book, store, server, config["LIMITS"], redis_client=client),
                          rate_limits={"submit": RedisRateLimiter(client, "submit", config["SUBMITS_PER_MINUTE"]),
                                       "watch": RedisRateLimiter(client, "watch", config["WATCHES_PER_MINUTE"])})
    book.beat_web()
    server.start_background_task(_keep_house, book, server)
    server.start_background_task(every, CATCH_UP_S, server.manager.catch_up, server.sleep, "delivery from the run logs")
    log.info("web process %s on the run queue at %s", book.me, config["MESSAGE_QUEUE"])


def _keep_house(book: WebBook, server) -> None:
    """A web process's chores, every HEARTBEAT_S: say it is alive (its sockets' watches count while it is),
    count its watchers again (Redis may have restarted empty), cancel queued runs nobody watches, end the runs of
    engine workers that died."""
    def chores() -> None:
        book.beat_web()
        deliver(server, book.recount() + book.housekeeping())
    every(HEARTBEAT_S, chores, server.sleep, "housekeeping")
