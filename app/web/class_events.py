"""Socket.IO handlers of classes (app.runs.classes): open, join, allow and lock students' submits, cancel a student's
run, show a stored run, close.

    class_open {} -> class_state (the teacher's: with its token)      class_close {code, token} -> class_closed
    class_join {code, token?} -> class_state (a student's; the teacher's with its token)
    class_allow {code, token, allow} -> class_state to the teacher and to every student
    class_lock {code, token, locked} -> class_state to the teacher and to every student: students' submits locked
        (refused with a message) or unlocked, whatever `allow` says
    class_cancel {code, token, run_id} -> the student run of the class (queued or executing) ends with run_error
        (code "cancelled", "cancelled by the teacher"), or run_error
    class_pause {code, token, run_id, paused} -> the running run of the class (the teacher's or a student's) waits
        between two steps, or goes on; its room gets run_paused. It goes on by itself after PAUSE_CAP_S, and the
        teacher's next run ends it (app.runs.book); a refusal is a run_error
    class_show {code, token, run_id} -> class_state to every student: the run the teacher's page shows (a stored
        run: a reference run, a replay), which students' pages then watch too
    poll_open {code, token, question, kind, choices?, figure?} -> class_state (its `poll`) to the teacher and every
        student: the teacher asks the class (app.runs.polls)       poll_close {code, token} -> the same, answers closed
    poll_answer {code, poll, answer} -> class_state to the student (with its answer) and to the teacher (the tally)

A refusal is one `run_error` naming the field. Submits need nothing new: a class member's `submit` is tagged
with its class and role by the runs (app.runs.service). While classes are open a background task ends those
whose teacher left for the grace and refreshes each teacher's view of the queue. This module knows payload
shapes, nothing of how runs are queued.
"""
import threading

from flask import Flask, current_app, request
from flask_socketio import emit

from ..protocol import RUN_ID, Event, Rejected
from ..runs.classes import Classes
from ..runs.redis_classes import classes_for
from ..runs.fanout import deliver
from . import class_routes
from .events import client_of
from .extensions import socketio

CHORE_S = 1.0
_chores_lock = threading.Lock()


def init_app(app: Flask) -> None:
    """Give the app its classes (in memory, or in the deployment's Redis) and their HTTP routes."""
    config = app.config
    classes = classes_for(app.extensions["runs"].redis, config["CLASS_GRACE_S"], config["MAX_CLASSES"],
                          config["MAX_CLASS_STUDENTS"])
    app.extensions["classes"] = classes
    app.extensions["runs"].classes = classes
    book = app.extensions["runs"].book
    classes.running_jobs = book.running_jobs   # the teacher sees (and may stop) its students' executing runs
    app.register_blueprint(class_routes.bp)


def _check(args: tuple, event: str, keys: set[str], optional: set[str] = frozenset()) -> dict:
    data = args[0] if len(args) == 1 else {} if not args else None
    if not isinstance(data, dict) or not keys <= set(data) <= keys | optional:
        names = ", ".join(sorted(keys)) + "".join(f", {k}?" for k in sorted(optional))
        raise Rejected("invalid", f"{event} takes one object {{{names}}}", field=event)
    for key in ("code", "token"):
        if key in data and not (isinstance(data[key], str) and 1 <= len(data[key]) <= 64):
            raise Rejected("invalid", f"{key} must be a string of 1 to 64 characters", field=key)
    for key in ("allow", "locked", "paused"):
        if key in data and not isinstance(data[key], bool):
            raise Rejected("invalid", f"{key} must be true or false", field=key)
    return data


def _answer(act) -> None:
    """Deliver what the classes answer to `act(classes, queued jobs)`, or its refusal as one run_error."""
    try:
        if not current_app.extensions["rate_limits"]["watch"].allow(request.sid):
            raise Rejected("rate_limited", "too many class requests: wait a little")
        runs, classes = current_app.extensions["runs"], current_app.extensions["classes"]
        deliver(socketio.server, act(classes, runs.book.queued_jobs()))
        _start_chores(classes, runs)
    except Rejected as r:
        emit(Event.RUN_ERROR, r.payload())


def _start_chores(classes: Classes, runs) -> None:
    with _chores_lock:
        if classes.chores_running or not len(classes):
            return
        classes.chores_running = True
    socketio.start_background_task(_chores, classes, runs, socketio.server)


def _chores(classes: Classes, runs, server) -> None:
    """While any class is open: every CHORE_S, end the classes whose teacher stayed away, refresh teachers' views."""
    while True:
        server.sleep(CHORE_S)
        with _chores_lock:
            if not len(classes):
                classes.chores_running = False
                return
        try:
            deliver(server, classes.chores(runs.book.queued_jobs()))
        except Rejected:   # the shared queue (Redis) unreachable: try again next time
            continue


@socketio.on("class_open")
def on_class_open(*args):
    _answer(lambda classes, queued: (_check(args, "class_open", set()), classes.open(request.sid, queued))[1])


@socketio.on("class_join")
def on_class_join(*args):
    def join(classes, queued):
        data = _check(args, "class_join", {"code"}, {"token"})
        return classes.join(request.sid, data["code"], data.get("token"), queued)
    _answer(join)


@socketio.on("class_allow")
def on_class_allow(*args):
    def allow(classes, queued):
        data = _check(args, "class_allow", {"code", "token", "allow"})
        return classes.allow(request.sid, data["code"], data["token"], data["allow"], queued)
    _answer(allow)


@socketio.on("class_lock")
def on_class_lock(*args):
    def lock(classes, queued):
        data = _check(args, "class_lock", {"code", "token", "locked"})
        return classes.lock_submits(request.sid, data["code"], data["token"], data["locked"], queued)
    _answer(lock)


def _run_id(data: dict) -> str:
    run_id = data["run_id"]
    if not isinstance(run_id, str) or RUN_ID.fullmatch(run_id) is None:
        raise Rejected("invalid", "run_id must be a run's id", field="run_id")
    return run_id


@socketio.on("class_cancel")
def on_class_cancel(*args):
    def cancel(classes, queued):
        data = _check(args, "class_cancel", {"code", "token", "run_id"})
        code = classes.check_teacher(request.sid, data["code"], data["token"])
        current_app.extensions["runs"].cancel_for_class(code, _run_id(data))
        return classes.refresh(code, current_app.extensions["runs"].book.queued_jobs())
    _answer(cancel)


@socketio.on("class_pause")
def on_class_pause(*args):
    def pause(classes, queued):
        data = _check(args, "class_pause", {"code", "token", "run_id", "paused"})
        code = classes.check_teacher(request.sid, data["code"], data["token"])
        current_app.extensions["runs"].pause_for_class(code, _run_id(data), data["paused"])
        return []
    _answer(pause)


@socketio.on("class_show")
def on_class_show(*args):
    def show(classes, queued):
        data = _check(args, "class_show", {"code", "token", "run_id"})
        run_id = _run_id(data)
        if not current_app.extensions["runs"].knows(run_id):
            raise Rejected("not_found", f"no run with id {run_id!r}", field="run_id", run_id=run_id)
        return classes.show(request.sid, data["code"], data["token"], run_id)
    _answer(show)


@socketio.on("class_close")
def on_class_close(*args):
    def close(classes, queued):
        data = _check(args, "class_close", {"code", "token"})
        return classes.close(request.sid, data["code"], data["token"])
    _answer(close)


@socketio.on("poll_open")
def on_poll_open(*args):
    def ask(classes, queued):
        data = _check(args, "poll_open", {"code", "token", "question", "kind"}, {"choices", "figure"})
        return classes.ask(request.sid, data["code"], data["token"], data["question"], data["kind"],
                           data.get("choices"), data.get("figure"), queued)
    _answer(ask)


@socketio.on("poll_close")
def on_poll_close(*args):
    def close(classes, queued):
        data = _check(args, "poll_close", {"code", "token"})
        return classes.close_poll(request.sid, data["code"], data["token"], queued)
    _answer(close)


@socketio.on("poll_answer")
def on_poll_answer(*args):
    def answer(classes, queued):
        data = _check(args, "poll_answer", {"code", "poll", "answer"})
        return classes.answer(request.sid, client_of(request.sid), data["code"], data["poll"], data["answer"], queued)
    _answer(answer)
