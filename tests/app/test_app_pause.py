"""A class's teacher pauses and resumes the run on screen (issue 38, "the teacher is in control"), over the socket
layer on the simulator: the run's lanes wait between two steps while it is paused and its room is told
(`run_paused`, "paused by the teacher"); it goes on when the teacher resumes it, or by itself after PAUSE_CAP_S so
that nothing hangs; the teacher's next run ends a paused student run; a student may not pause, nor may the teacher
pause a run outside the class. The engine is tests/app/test_app_class.py's GatedEngine: each run starts only when
the test lets it, so a pause lands before the first step, whatever the machine's speed."""
import time

import pytest

from app.protocol import Rejected
from app.runs.book import NEXT_RUN
from app.runs.job import STUDENT
from app.runs.memory_book import MemoryBook
from tests.app.test_app_class import MIX, GatedEngine, ended, job, join, open_class, submit, wait_until


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def books(request, tmp_path):
    """(the web side's book, the engine worker's): one MemoryBook, or a RedisBook and a WorkerBook on one redis-server."""
    if request.param == "memory":
        book = MemoryBook(max_queued=32, grace_s=60, recent_runs=10)
        yield book, book
        return
    from app.runs.redis_book import RedisBook
    from app.runs.redis_link import connect_redis
    from app.runs.worker_book import WorkerBook
    from tests.kit.scale import Deployment

    d = Deployment(tmp_path)
    d.start_redis()
    try:
        yield RedisBook(connect_redis(d.url), "web-test", 32, 60), WorkerBook(connect_redis(d.url), "worker-test", 32, 60)
    finally:
        d.stop()


def test_a_pause_set_on_the_web_side_is_what_the_engine_worker_reads_and_only_a_running_class_run_takes_one(books):
    web, worker = books
    web.submit(job("s-run", "K1", STUDENT))
    web.submit(job("s-queued", "K1", STUDENT))
    taken = worker.take(timeout=0)[0]
    assert taken.run_id == "s-run" and worker.paused_since(taken) is None
    for run_id, code in (("s-run", "K2"), ("s-queued", "K1"), ("nobody", "K1")):  # another class's; not running; none
        with pytest.raises(Rejected):
            web.pause(run_id, code, True)
    web.pause("s-run", "K1", True)
    since = worker.paused_since(taken)
    assert since is not None and abs(time.time() - since) < 60
    web.pause("s-run", "K1", True)                            # again: still paused since then (the cap counts from it)
    assert worker.paused_since(taken) == since
    web.pause("s-run", "K1", False)
    assert worker.paused_since(taken) is None


def pause(teacher, code: str, token: str, run_id: str, paused: bool) -> None:
    teacher.emit("class_pause", {"code": code, "token": token, "run_id": run_id, "paused": paused})


def running(app, run_id: str) -> bool:
    return run_id in [job.run_id for job in app.extensions["runs"].book.running_jobs()]


def test_the_teacher_pauses_and_resumes_the_run_the_class_watches_and_a_forgotten_pause_ends_by_itself(make_app, connect):
    engine = GatedEngine()
    app = make_app({"CANCEL_GRACE_S": 60, "WATCHES_PER_MINUTE": 1000, "SUBMITS_PER_MINUTE": 1000, "PAUSE_CAP_S": 0.3},
                   engine=engine)
    try:
        teacher, state = open_class(connect, app)
        code, token = state["code"], state["token"]
        student = join(connect, app, code)
        run_id = submit(teacher)["run_id"]
        wait_until(lambda: student.named("class_state")[-1]["run_id"] == run_id)
        student.emit("watch", {"run_id": run_id})
        wait_until(lambda: running(app, run_id))                 # taken, held at its start by the gate
        pause(teacher, code, token, run_id, True)
        engine.let(1)
        held = student.wait_for("run_paused", run_id, timeout=10)
        assert (held["paused"], held["reason"]) == (True, "paused by the teacher")
        assert student.named("tick", run_id) == []               # the lanes wait: no step while paused
        pause(teacher, code, token, run_id, False)
        student.wait_for("run_finished", run_id, timeout=10)
        said = [(p["paused"], p["reason"]) for p in student.named("run_paused", run_id)]
        assert said == [(True, "paused by the teacher"), (False, "resumed by the teacher")]
        ticks = student.named("tick", run_id)
        assert ticks and ticks[0]["seq"] > held["seq"]            # every step came after the pause was lifted

        again = submit(teacher)["run_id"]                        # paused and forgotten: it goes on after the cap
        wait_until(lambda: running(app, again))
        pause(teacher, code, token, again, True)
        engine.let(1)
        assert teacher.wait_for("run_finished", again, timeout=10)["metrics"]["static"]["tokens"] == 7
        assert [p["reason"] for p in teacher.named("run_paused", again)] == \
            ["paused by the teacher", "resumed by itself after 0.3 s paused"]
    finally:
        engine.let()


def test_the_teachers_next_run_ends_a_paused_student_run_and_only_the_teacher_pauses_its_class_runs(make_app, connect):
    engine = GatedEngine()
    app = make_app({"CANCEL_GRACE_S": 60, "WATCHES_PER_MINUTE": 1000, "SUBMITS_PER_MINUTE": 1000}, engine=engine)
    try:
        teacher, state = open_class(connect, app)
        code, token = state["code"], state["token"]
        student = join(connect, app, code)
        teacher.emit("class_allow", {"code": code, "token": token, "allow": True})
        wait_until(lambda: student.named("class_state")[-1]["allow_submit"])
        theirs = submit(student)["run_id"]
        wait_until(lambda: running(app, theirs))
        student.emit("class_pause", {"code": code, "token": "x" * 32, "run_id": theirs, "paused": True})
        assert student.wait_for("run_error")["code"] == "forbidden"   # a student may not
        pause(teacher, code, token, theirs, True)
        engine.let(1)
        assert student.wait_for("run_paused", theirs, timeout=10)["paused"] is True
        mine = submit(teacher, {**MIX, "name": "the teacher's next"})["run_id"]
        stopped = ended(student, theirs)
        assert stopped["code"] == "cancelled" and NEXT_RUN in stopped["message"], stopped
        engine.let(1)
        assert teacher.wait_for("run_finished", mine, timeout=10)["metrics"]["static"]["tokens"] == 7

        outsider = connect(app)                                  # a run outside the class is not the teacher's
        other = submit(outsider, {**MIX, "name": "outsider"})["run_id"]
        wait_until(lambda: running(app, other))
        errors = len(teacher.named("run_error"))
        pause(teacher, code, token, other, True)
        wait_until(lambda: len(teacher.named("run_error")) > errors)
        assert teacher.named("run_error")[-1]["code"] == "not_found"
        engine.let(1)
        assert outsider.wait_for("run_finished", other, timeout=10) and outsider.named("run_paused", other) == []
    finally:
        engine.let()
