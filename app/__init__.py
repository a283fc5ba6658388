"""Batch Lanes' web server: the page, a small JSON API and the Socket.IO protocol, over one engine worker in
this process or over engine workers elsewhere that share a Redis run queue.

    from app.factory import create_app        python -m app [...]        python -m app.engine_worker [...]

Nothing is imported here, so that `python -m app --async-mode eventlet` can patch the standard library before
Flask, engine.io or Redis load. This package knows the step record and the engine's public API, nothing of
scheduling.
"""
