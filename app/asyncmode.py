"""The server's async mode, in one place: "threading" (the default) or "eventlet" (opt-in, green threads).

Every eventlet-specific call lives here, so no other module names it. In eventlet mode the standard library
must be patched before Flask, engine.io or Redis load (`monkey_patch_if_asked`, first thing the command line
does), and blocking compute (forward passes, tokenizing, the store) goes through eventlet's OS thread pool
(`make_offload`) so that one long step does not stall every socket. Background tasks and sleeps go through
the Socket.IO server (`start_background_task`, `sleep`), which knows the mode by itself. `client_socket` finds
a request's connection in any of the servers' WSGI environ (app.server), so a handler can see its client leave. `serve_options`
is how each mode's HTTP server is told to drop idle connections and not to name its version.
This module knows the two modes, nothing of runs, sockets or the engine.
"""
from typing import Callable

MODES = ("threading", "eventlet")
IDLE_TIMEOUT_S = 60   # a connection silent this long is closed (engine.io pings every 25 s, so live sockets never are)
SERVER_NAME = "Batch Lanes"  # the `Server` header: no server or Python version for a scanner to match
HELP = "threading (default) or eventlet (in one process, forward passes go through eventlet.tpool)"


def monkey_patch_if_asked(mode: str) -> None:
    """Patch the standard library for green threads in eventlet mode (before anything else imports it)."""
    if mode == "eventlet":
        import eventlet
        eventlet.monkey_patch()


def make_offload(mode: str) -> Callable:
    """How blocking compute is called: `offload(fn, *args, **kwargs)` through eventlet's thread pool, or directly
    on this thread."""
    if mode == "eventlet":
        from eventlet import tpool
        return tpool.execute
    return lambda fn, *args, **kwargs: fn(*args, **kwargs)


def client_socket(environ: dict):
    """The socket of the request's connection: gunicorn's (`gunicorn.socket`), werkzeug's (`werkzeug.socket`) or
    eventlet's (its input's), or None where the server hands over none."""
    sock = environ.get("gunicorn.socket") or environ.get("werkzeug.socket")
    if sock is None and "eventlet.input" in environ:
        sock = getattr(environ["eventlet.input"], "_sock", None)
    return sock


def serve_options(mode: str) -> dict:
    """Keyword arguments for `socketio.run` in `mode`: an idle-connection timeout (slow or half-open connections
    do not pile up threads) and a `Server` header without versions."""
    if mode == "eventlet":
        return {"socket_timeout": IDLE_TIMEOUT_S}   # eventlet.wsgi names no version by itself
    from werkzeug.serving import WSGIRequestHandler

    class Handler(WSGIRequestHandler):
        timeout = IDLE_TIMEOUT_S   # socketserver.StreamRequestHandler sets it on the connection

        def version_string(self) -> str:
            return SERVER_NAME

    # The werkzeug server is what threading mode has; it runs without a TTY only when told so.
    return {"request_handler": Handler, "allow_unsafe_werkzeug": True}
