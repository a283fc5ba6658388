"""Delivery to a run's room, with every logged event sent to each watcher exactly once.

A watcher joining a run mid-way is sent the run's log so far (its backlog) and then the live events. Those
two can cross: an event logged before the backlog was read may be delivered live after it. So each process
remembers, per (run, socket), the last `seq` that socket's backlog held (its watermark), and a live event
to the run's room skips the sockets whose watermark already covers it. Joining (enter the room, read the
log, send it, set the watermark) and delivering happen under one lock per process, so nothing falls between.

`LocalFanout` is the client manager of a single process; `RedisFanout` that of a web process sharing rooms
with others over Redis (python-socketio's RedisManager), filtering what arrives from the queue. Pub/sub drops
what is published while a listener reconnects, so a web process does not trust it alone: per run room it
keeps the highest `seq` delivered here (every one before it delivered too), delivers a logged event only as
the next one, fills a gap from the run's log in Redis, and every CATCH_UP_S reads each room's log past that
`seq` (`catch_up`): an event pub/sub lost arrives within that, and none twice. This module knows socket ids,
rooms and `seq`, nothing of runs or of the engine.
"""
import logging
import threading
import time
from typing import Callable

import redis
import socketio

from ..protocol import NAMESPACE, Enter, Event, Send

log = logging.getLogger("batch_lanes.fanout")
CATCH_UP_S = 0.5        # how often each room's log is read for what pub/sub did not bring
ENDS = {str(Event.RUN_FINISHED), str(Event.RUN_ERROR), str(Event.SWEEP_FINISHED)}  # nothing follows these


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
            alone = not self.here(room)
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
            self.joined(room, self.marks[(room, sid)] if alone else None)
            return sends

    def here(self, room: str) -> bool:
        """Whether a socket of this process is in `room`."""
        return bool(self.rooms.get(NAMESPACE, {}).get(room))

    def joined(self, room: str, mark: int | None) -> None:
        """A socket joined `room` with its backlog up to `mark` (None: others of this process were there already)."""

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
    """A web process of several: what arrives from Redis (and what this process emits) passes the watermarks, a
    run room's logged events in `seq` order exactly once, the gaps filled from the log (`read_log`)."""

    def __init__(self, *args, read_log: Callable[[str, int], list[tuple[str, dict]]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.read_log = read_log               # read_log(room, after) -> the room's logged events past `after`
        self.delivered: dict[str, int] = {}    # run room with a socket here -> highest seq delivered (all before too)
        self.ended: set[str] = set()           # rooms whose last event was delivered: nothing more to read
        self.caught_up_at = time.monotonic()   # when `catch_up` last read every room's log

    def enter_room(self, sid, namespace, room, eio_sid=None):
        with self.watch_lock:
            if room is not None and room != sid:
                self.delivered.setdefault(room, 0)   # a submitter enters before its run has any event
            return super().enter_room(sid, namespace, room, eio_sid=eio_sid)

    def joined(self, room: str, mark: int | None) -> None:
        if mark is not None:                   # alone here: what came before its backlog is nobody's here
            self.delivered[room] = mark

    def _handle_emit(self, message):
        with self.watch_lock:
            room, data = message.get("room"), message.get("data")
            seq = _seq(room, data)
            if seq is not None:
                if not self.here(room):
                    return
                last = self.delivered.setdefault(room, 0)
                if seq <= last:
                    return                     # delivered already, from the log
                if seq > last + 1:
                    self._fill(room, seq - 1)
                    if self.delivered[room] != seq - 1:
                        return                 # the log lacks the gap for now: `catch_up` delivers it in order
                self.delivered[room] = seq
                if message.get("event") in ENDS:
                    self.ended.add(room)
            message = {**message, "skip_sid": self.skips(room, data, message.get("skip_sid"))}
            return super()._handle_emit(message)

    def _fill(self, room: str, upto: int) -> None:
        """Deliver `room`'s logged events after the last delivered, up to `upto`, from the log (lock held)."""
        try:
            events = self.read_log(room, self.delivered[room])
        except redis.RedisError as e:
            log.warning("run %s: could not read its log to fill a gap: %s", room, e)
            return
        self._send_logged(room, [(event, payload) for event, payload in events if payload["seq"] <= upto])

    def _send_logged(self, room: str, events: list[tuple[str, dict]]) -> None:
        """Send the next logged events of `room` here, in order, each to its sockets not covered by a backlog."""
        for event, payload in events:
            if payload["seq"] != self.delivered[room] + 1:
                continue
            socketio.Manager.emit(self, event, payload, NAMESPACE, room=room, skip_sid=self.skips(room, payload, None))
            self.delivered[room] = payload["seq"]
            if event in ENDS:
                self.ended.add(room)

    def catch_up(self) -> None:
        """Read every live room's log past what was delivered here and deliver the rest (every CATCH_UP_S); drop
        the rooms nobody here is in. RedisError if Redis is unreachable (the caller says so and keeps trying)."""
        with self.watch_lock:
            for room in [room for room in self.delivered if not self.here(room)]:
                del self.delivered[room]
                self.ended.discard(room)
            rooms = {room: seq for room, seq in self.delivered.items() if room not in self.ended}
        for room, seq in rooms.items():
            events = self.read_log(room, seq)   # outside the lock: pub/sub delivery goes on meanwhile
            if events:
                with self.watch_lock:
                    if room in self.delivered:
                        self._send_logged(room, events)
        self.caught_up_at = time.monotonic()

    def delivering(self) -> bool:
        """Whether `catch_up` read every room's log lately (what /healthz calls delivery working)."""
        return time.monotonic() - self.caught_up_at < 4 * CATCH_UP_S + 2

    def _redis_listen_with_retries(self):  # pragma: no cover (python-socketio's, retrying every second, not 1-60 s)
        while True:
            try:
                self._redis_connect()
                self.pubsub.subscribe(self.channel)
                yield from self.pubsub.listen()
            except Exception as exc:  # what python-socketio catches here; `catch_up` brings what is missed
                self._get_logger().error("Cannot receive from redis... retrying in 1 s: %s", exc)
                time.sleep(1)


def _seq(room, data) -> int | None:
    """The `seq` of a logged event of run room `room`, or None for any other emit."""
    payload = data[0] if isinstance(data, list) and len(data) == 1 else data
    if isinstance(payload, dict) and "seq" in payload and payload.get("run_id") == room:
        return payload["seq"]
    return None


def deliver(server, actions: list) -> None:
    """Carry out a run book's answer on `server` (a socketio.Server or a write-only manager's emit)."""
    for action in actions:
        if isinstance(action, Enter):
            server.enter_room(action.sid, action.room, namespace=NAMESPACE)
        elif action.local:
            server.emit(str(action.event), action.payload, to=action.to, namespace=NAMESPACE, ignore_queue=True)
        else:
            server.emit(str(action.event), action.payload, to=action.to, namespace=NAMESPACE)
