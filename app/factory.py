"""The application factory: `create_app(config=None, engine=None)` and the module-level `socketio`.

`create_app(config=None, engine=None)` builds the Flask app, binds the module-level `socketio` to it
and starts the engine worker (`app.worker`), which owns the model: it loads it (unless `engine` is
given, e.g. `Engine(None)` for the simulator or a test's already loaded model) and runs the queued
runs one at a time. HTTP lives in `routes.py`, socket handlers in `events.py`, finished runs in
`store.py`. `DEFAULTS` lists every config key.
"""
import logging
import os
import secrets
from pathlib import Path

from flask import Flask
from flask_socketio import SocketIO

from engine import Engine
from engine.workload import Limits

ROOT = Path(__file__).resolve().parent.parent
socketio = SocketIO()
log = logging.getLogger("batch_lanes")

DEFAULTS = {
    "LIMITS": Limits(),             # every workload limit (engine.workload.Limits)
    "MAX_MESSAGE_BYTES": 256 * 1024,  # largest socket message accepted (max_http_buffer_size); a bigger one drops the connection
    "MAX_QUEUED_RUNS": 32,          # runs waiting for the engine (the running one not counted); more get "busy, try again"
    "SUBMITS_PER_MINUTE": 10,       # submits one client may send per sliding minute (rejected ones count too)
    "WATCHES_PER_MINUTE": 60,       # watches (and cancels) one client may send per sliding minute
    "MAX_SWEEP_RATES": 8,           # request rates one load sweep may run (each rate is a run of every lane)
    "CANCEL_GRACE_S": 5.0,          # a run nobody watches is cancelled after this many seconds (a reload can rejoin)
    "RECENT_RUNS": 100,             # finished, failed and cancelled runs kept in memory for `watch`
    "MODEL": None,                  # model path for the worker to load (None: the default SmolLM2)
    "DTYPE": "float32",
    "DEVICE": "auto",
    "DATA_DIR": None,               # folder of runs.sqlite3 (None: $BATCH_LANES_DATA, else data/ in the repo)
    "ASYNC_MODE": "threading",      # "threading" or "eventlet" (then `eventlet.monkey_patch()` must run first)
}
# The server's own limits, by the name `GET /api/limits` and `--limit NAME=N` give them -> their config key.
SERVER_LIMITS = {"max_message_bytes": "MAX_MESSAGE_BYTES", "max_queued_runs": "MAX_QUEUED_RUNS",
                 "submits_per_minute": "SUBMITS_PER_MINUTE", "watches_per_minute": "WATCHES_PER_MINUTE",
                 "max_sweep_rates": "MAX_SWEEP_RATES"}


def create_app(config: dict | None = None, engine: Engine | None = None) -> Flask:
    """The app, its socket server and a running engine worker (stop it with `app.extensions["worker"].stop()`)."""
    from . import events, routes  # noqa: F401  (events registers its handlers on `socketio`)
    from .events import RateLimiter, WirePacket
    from .store import RunStore
    from .worker import EngineWorker

    app = Flask(__name__, template_folder=str(ROOT / "templates"), static_folder=str(ROOT / "static"))
    app.config.update(DEFAULTS)
    app.config["SECRET_KEY"] = os.environ.get("BATCH_LANES_SECRET_KEY") or secrets.token_hex(32)
    app.config.update(config or {})
    data_dir = app.config["DATA_DIR"] or os.environ.get("BATCH_LANES_DATA") or ROOT / "data"
    app.config["DATA_DIR"] = Path(data_dir)
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_MESSAGE_BYTES"]  # HTTP bodies (POST /api/generate) too

    # Same-origin only: no cors_allowed_origins, so engine.io accepts just this host's own pages.
    socketio.init_app(app, async_mode=app.config["ASYNC_MODE"],
                      max_http_buffer_size=app.config["MAX_MESSAGE_BYTES"], serializer=WirePacket,
                      logger=False, engineio_logger=False)
    app.register_blueprint(routes.bp)
    store = RunStore(app.config["DATA_DIR"] / "runs.sqlite3")
    worker = EngineWorker(socketio.server, app.config, store, engine)
    app.extensions["store"] = store
    app.extensions["worker"] = worker
    app.extensions["rate_limits"] = {"submit": RateLimiter(app.config["SUBMITS_PER_MINUTE"]),
                                     "watch": RateLimiter(app.config["WATCHES_PER_MINUTE"])}
    worker.start()
    return app
