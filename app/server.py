"""How `python -m app` listens: gunicorn's threaded worker (the default), eventlet's own WSGI server in eventlet mode,
Werkzeug's development server only under `--dev`.

    serve(make_app, Listen(host, port, threads, certfile, keyfile), mode, dev)

gunicorn runs one worker process (the engine and its live lane live in it: one model, one process) with a pool of
`threads` threads, as Flask-SocketIO's threading mode asks of it (`gunicorn -w 1 --threads N`): a streamed request,
a long-polling or WebSocket socket each hold a thread while they last; idle HTTP/1.1 connections are kept alive
(KEEPALIVE_S) in the worker's poller, holding none. The app is made in the worker (`make_app`, after the fork), so its
engine thread and torch never cross a fork; the worker stops its engine as it exits. TLS is gunicorn's (or
eventlet's, or Werkzeug's) own, from a key and a certificate file. This module knows the three servers, nothing of
the app it serves.
"""
from dataclasses import dataclass
from typing import Callable

from gunicorn.app.base import BaseApplication

from .asyncmode import IDLE_TIMEOUT_S, SERVER_NAME, serve_options

THREADS = 512        # the worker's threads: every open stream, poll or WebSocket holds one (a class of 200 sockets)
KEEPALIVE_S = 60     # an idle keep-alive connection is closed after this long (nginx's upstream default is 60 s)
GRACE_S = 5          # a stopping worker waits this long for its requests (a stream may last minutes: it is cut)


@dataclass(frozen=True)
class Listen:
    host: str
    port: int
    threads: int = THREADS
    certfile: str | None = None       # TLS: both files, or neither
    keyfile: str | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.certfile else 'http'}://{self.host}:{self.port}"


def serve(make_app: Callable, listen: Listen, mode: str, dev: bool) -> None:
    """Serve the app `make_app()` makes until stopped: gunicorn in threading mode, else (eventlet, or `dev`)
    Flask-SocketIO's own runner over eventlet's or Werkzeug's server."""
    if mode == "threading" and not dev:
        _Gunicorn(make_app, listen).run()
        return
    from .web.extensions import socketio

    app = make_app()
    tls = {}
    if listen.certfile:
        tls = {"certfile": listen.certfile, "keyfile": listen.keyfile} if mode == "eventlet" else \
            {"ssl_context": (listen.certfile, listen.keyfile)}
    try:
        socketio.run(app, host=listen.host, port=listen.port, debug=False, use_reloader=False, log_output=False,
                     **serve_options(mode), **tls)
    finally:
        stop(app)


def stop(app) -> None:
    worker = app.extensions.get("worker")
    if worker is not None:
        worker.stop()


class _Gunicorn(BaseApplication):
    """gunicorn, configured here rather than by a file or its command line (it reads neither)."""

    def __init__(self, make_app: Callable, listen: Listen):
        self.make_app, self.listen, self.app = make_app, listen, None
        super().__init__()

    def load_config(self) -> None:
        import gunicorn.http.wsgi
        gunicorn.http.wsgi.SERVER = SERVER_NAME   # the `Server` header: no server name for a scanner to match
        listen = self.listen
        options = {"bind": [f"[{listen.host}]:{listen.port}" if ":" in listen.host else f"{listen.host}:{listen.port}"],
                   "workers": 1, "worker_class": "gthread", "threads": listen.threads,
                   "worker_connections": listen.threads + 1000, "keepalive": KEEPALIVE_S,
                   "timeout": 2 * IDLE_TIMEOUT_S, "graceful_timeout": GRACE_S, "accesslog": None,
                   "errorlog": "-", "loglevel": "warning", "worker_exit": self._worker_exit,
                   "post_fork": _die_with_the_arbiter,
                   "certfile": listen.certfile, "keyfile": listen.keyfile}
        for key, value in options.items():
            if value is not None:
                self.cfg.set(key, value)

    def load(self):
        self.app = self.make_app()
        return self.app

    def _worker_exit(self, server, worker) -> None:
        if self.app is not None:
            stop(self.app)


def _die_with_the_arbiter(server, worker) -> None:
    """In the worker, just forked: the kernel kills it when gunicorn's arbiter dies (Linux's PR_SET_PDEATHSIG), so
    `kill -9` of `python -m app` ends its sockets and streams at once, as a one-process server's would; gunicorn
    alone notices a dead arbiter only at its next heartbeat, and meanwhile the orphan goes on serving."""
    import ctypes
    import os
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):   # not Linux: gunicorn's own check stands
        return
    if os.getppid() != server.pid:      # the arbiter died between the fork and the call above
        os._exit(1)
