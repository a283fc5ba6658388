"""What the class tests share: a small mix, waiting for a condition, and a teacher, a student and a submit on
Socket.IO test clients (tests/app/test_app_class*.py)."""
import time

from app.runs.job import TEACHER

MIX = {"name": "tiny", "slots": 2, "requests": [{"id": "A", "prompt": "Say hi.", "max_new_tokens": 3},
                                                {"id": "B", "prompt": "Name a fruit.", "max_new_tokens": 4}]}


def wait_until(predicate, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def open_class(connect, app):
    teacher = connect(app)
    teacher.emit("class_open", {})
    state = teacher.wait_for("class_state")
    assert state["role"] == TEACHER and len(state["code"]) == 5 and len(state["token"]) >= 24
    return teacher, state


def join(connect, app, code, **auth):
    student = connect(app)
    student.emit("class_join", {"code": code, **auth})
    student.wait_for("class_state")
    return student


def submit(probe, workload=MIX) -> dict:
    before = len(probe.named("run_queued")) + len(probe.named("run_error"))
    probe.emit("submit", {"workload": workload, "lanes": ["static", "continuous"]})
    wait_until(lambda: len(probe.named("run_queued")) + len(probe.named("run_error")) > before)
    return (probe.named("run_queued") + probe.named("run_error"))[-1]
