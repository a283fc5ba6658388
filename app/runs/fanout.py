"""Delivery to a run's room, with every logged event sent to each watcher exactly once.

A watcher joining a run mid-way is sent the run's log so far (its backlog) and then the live events. Those
two can cross: an event logged before the backlog was read may be delivered live after it. So each process
remembers, per (run, socket), the last `seq` that socket's backlog held (its watermark), and a live event
to the run's room skips the sockets whose watermark already covers it. Joining (enter the room, read the
log, send it, set the watermark) and delivering happen under one lock per process, so nothing falls between.

`LocalFanout` is the client manager of a single process; `RedisFanout` that of a web process sharing rooms
with others over Redis (python-socketio's RedisManager), filtering what arrives from the queue. This module
knows socket ids, rooms and `seq`, nothing of runs or of the engine.
"""
import threading
from typing import Callable

import socketio

from ..protocol import NAMESPACE, Enter, Send


class Watermarks:
    """Per (run room, socket id): the last `seq` sent to that socket in its backlog."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.watch_lock = threading.RLock()
        self.marks: dict[tuple[str, str], int] = {}

    def skips(self, room, data, skip_sid):
        """`skip_sid` plus the sockets in `room` whose backlog already held this event."""
        payload = data[0] if isinstance(data, list) and len(data) == 1 else data
        if not isinstance(payload, dict) or "seq" not in payload or payload.get("run_id") != room:
            return skip_sid
        seq = payload["seq"]
        covered = [sid for (run, sid), mark in self.marks.items() if run == room and mark >= seq]
        if not covered:
            return skip_sid
        return covered + (skip_sid if isinstance(skip_sid, list) else [] if skip_sid is None else [skip_sid])

    def join(self, server, sid: str, room: str, read_backlog: Callable[[], list[Send] | None]) -> list[Send] | None:
        """Put `sid` in `room`, read and send its backlog, set its watermark: all before any live event of `room`
        is delivered here. `read_backlog` may raise (then `sid` leaves the room) or return None (not a live run)."""
        with self.watch_lock:
            server.enter_room(sid, room, namespace=NAMESPACE)
            try:
                sends = read_backlog()
            except BaseException:
                server.leave_room(sid, room, namespace=NAMESPACE)
                raise
            if sends is None:
                server.leave_room(sid, room, namespace=NAMESPACE)
                return None
            deliver(server, sends)
            self.marks[(room, sid)] = max((s.payload.get("seq", 0) for s in sends), default=0)
            return sends

    def forget(self, sid: str) -> None:
        with self.watch_lock:
            for key in [key for key in self.marks if key[1] == sid]:
                del self.marks[key]


class LocalFanout(Watermarks, socketio.Manager):
    """One process: every emit to a room passes the watermarks."""

    def emit(self, event, data, namespace, room=None, skip_sid=None, callback=None, to=None, **kwargs):
        room = to or room
        with self.watch_lock:
            return super().emit(event, data, namespace, room=room, skip_sid=self.skips(room, data, skip_sid),
                                callback=callback, **kwargs)


class RedisFanout(Watermarks, socketio.RedisManager):
    """A web process of several: what arrives from Redis (and what this process emits) passes the watermarks."""

    def _handle_emit(self, message):
        with self.watch_lock:
            message = {**message, "skip_sid": self.skips(message.get("room"), message.get("data"),
                                                         message.get("skip_sid"))}
            return super()._handle_emit(message)


def deliver(server, actions: list) -> None:
    """Carry out a run book's answer on `server` (a socketio.Server or a write-only manager's emit)."""
    for action in actions:
        if isinstance(action, Enter):
            server.enter_room(action.sid, action.room, namespace=NAMESPACE)
        elif action.local:
            server.emit(str(action.event), action.payload, to=action.to, namespace=NAMESPACE, ignore_queue=True)
        else:
            server.emit(str(action.event), action.payload, to=action.to, namespace=NAMESPACE)
