"""Batch Lanes' web server: the page, a small JSON API and the Socket.IO protocol over one engine worker.

    from app import create_app, socketio     # app.factory, imported on first use

Nothing is imported here up front, so that `python -m app --async-mode eventlet` can monkey-patch the
standard library before Flask, engine.io or torch load. This package knows the step record and the
engine's public API, nothing of scheduling.
"""


def __getattr__(name: str):
    if name in ("create_app", "socketio", "DEFAULTS"):
        from . import factory
        return getattr(factory, name)
    raise AttributeError(f"module 'app' has no attribute {name!r}")
