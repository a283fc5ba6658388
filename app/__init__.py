"""Batch Lanes' web server: the page, a small JSON API and the Socket.IO protocol, over one engine worker in
this process or over engine workers elsewhere that share a Redis run queue.

    from app.web.factory import create_app        python -m app [...]        python -m app.engine_worker [...]

Three wings, each a package: `web/` (the factory, HTTP routes, socket handlers, the OpenAI endpoint, rate
limits), `runs/` (jobs, the run book and its two implementations, fan-out, the store, the engine worker's
loop), `live/` (the OpenAI traffic's gateway and its Prometheus metrics). At the top: `protocol.py` (the wire
every wing speaks), `settings.py` (config keys), `asyncmode.py` (the async mode's one seam), `server.py` (gunicorn, eventlet's
server or Werkzeug's under --dev), `logs.py` (text or JSON lines), and the two entry points, `cli.py` (`python -m app`) and `engine_worker.py`. The web wing never imports torch.

Nothing is imported here, so that `python -m app --async-mode ...` can patch the standard library before
Flask, engine.io or Redis load. This package knows the step record and the engine's public API, nothing of
scheduling.
"""
