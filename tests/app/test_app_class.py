"""Classes on the simulator: a teacher opens one, students join and follow the teacher's runs, students' runs
queue behind the teacher's (in the memory book and in the Redis book on a real redis-server), the per-class cap,
50 students receiving every tick, the teacher's token, closing and the teacher's grace. The QR code's address:
test_app_class_qr.py; a class over Redis and python-socketio students: test_app_class_scale.py."""
import threading

import pytest

from app.protocol import Rejected
from app.runs.job import RUN, STUDENT, TEACHER, Job
from app.runs.memory_book import MemoryBook
from engine import Engine
from tests.kit.classroom import MIX, join, open_class, submit, wait_until


class GatedEngine(Engine):
    """The simulator, whose `start` waits for a pass from the test (`let(n)`): runs stay queued behind the first."""

    def __init__(self):
        super().__init__(None)
        self.passes, self.entered = threading.Semaphore(0), threading.Event()
        self.started: list[str] = []

    def let(self, n: int = 1000) -> None:
        for _ in range(n):
            self.passes.release()

    def start(self, workload, lanes=None):
        self.entered.set()
        assert self.passes.acquire(timeout=120), "the test never let this run start"
        self.started.append(workload.name)
        return super().start(workload, lanes)


def job(name: str, code: str | None = None, role: str | None = None) -> Job:
    return Job(RUN, {"workload": MIX}, f"sid-{name}", ["static"], run_id=name, class_code=code, role=role)


# -- the queue order, in both books -----------------------------------------------------------------------

@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def book(request, tmp_path):
    if request.param == "memory":
        yield MemoryBook(max_queued=32, grace_s=60, recent_runs=10, class_cap=3)
        return
    from app.runs.redis_book import RedisBook
    from app.runs.redis_link import connect_redis
    from tests.kit.scale import Deployment

    d = Deployment(tmp_path)
    d.start_redis()
    try:
        yield RedisBook(connect_redis(d.url), "web-test", max_queued=32, grace_s=60, class_cap=3)
    finally:
        d.stop()


def taken_order(book) -> list[str]:
    order = []
    while True:
        taken, _ = book.take(timeout=0)
        if taken is None:
            return order
        order.append(taken.run_id)


def test_a_teachers_run_submitted_last_is_taken_before_every_queued_student_run_of_its_class(book):
    book.submit(job("running"))
    assert book.take(timeout=0)[0].run_id == "running"       # executing: never preempted
    for name in ("other", "s1", "s2"):
        book.submit(job(name, *(("K1", STUDENT) if name != "other" else (None, None))))
    book.submit(job("s-elsewhere", "K2", STUDENT))
    sends = book.submit(job("t1", "K1", TEACHER))
    positions = {s.payload["run_id"]: s.payload for s in sends}
    assert positions["t1"]["position"] == 2 and positions["s1"]["position"] == 3   # s1 moved back
    assert positions["s1"]["ahead"] == {"teacher": 1, "student": 0, "other": 1}
    assert positions["s2"]["ahead"] == {"teacher": 1, "student": 1, "other": 1}
    assert "ahead" not in positions["other"]                 # without a class, run_queued is as it was
    book.submit(job("t2", "K1", TEACHER))                    # a second teacher run: after the first, before students
    assert taken_order(book) == ["other", "t1", "t2", "s1", "s2", "s-elsewhere"]


def test_a_class_holds_at_most_its_cap_of_queued_student_runs_and_the_refusal_names_it(book):
    for i in range(3):
        book.submit(job(f"s{i}", "K1", STUDENT))
    with pytest.raises(Rejected) as refused:
        book.submit(job("s3", "K1", STUDENT))
    assert refused.value.code == "class_full" and "limit is 3 per class" in refused.value.message
    book.submit(job("t", "K1", TEACHER))                     # the teacher's runs never count
    book.submit(job("s-other-class", "K2", STUDENT))
    assert taken_order(book) == ["t", "s0", "s1", "s2", "s-other-class"]


def test_a_teachers_cancel_stops_only_its_class_student_runs_executing_or_queued_and_says_who(book):
    book.submit(job("s-run", "K1", STUDENT))
    executing = book.take(timeout=0)[0]
    assert [j.run_id for j in book.running_jobs()] == ["s-run"]
    for name, code, role in (("s-queued", "K1", STUDENT), ("t", "K1", TEACHER), ("s-other", "K2", STUDENT)):
        book.submit(job(name, code, role))
    for run_id in ("t", "s-other"):                           # the teacher's own, another class's: not its to stop
        with pytest.raises(Rejected):
            book.cancel(None, run_id, class_code="K1")
    assert book.cancel(None, "s-run", class_code="K1") == [] and book.stop_reason(executing) == "cancelled by the teacher"
    ended = [s.payload for s in book.cancel(None, "s-queued", class_code="K1") if s.payload.get("code") == "cancelled"]
    assert [(p["run_id"], p["message"]) for p in ended] == [("s-queued", "run s-queued cancelled: cancelled by the teacher")]
    assert [j.run_id for j in book.queued_jobs()] == ["t", "s-other"]


# -- classes over the socket layer (in-process server, simulator) -----------------------------------------

@pytest.fixture
def gated(make_app):
    engine = GatedEngine()
    app = make_app({"CANCEL_GRACE_S": 60, "MAX_CLASS_QUEUED": 3, "WATCHES_PER_MINUTE": 1000,
                    "SUBMITS_PER_MINUTE": 1000}, engine=engine)
    yield app, engine
    engine.let()


def test_fifty_students_follow_the_teachers_run_and_each_receives_every_tick(gated, connect):
    app, engine = gated
    teacher, state = open_class(connect, app)
    students = [join(connect, app, state["code"]) for _ in range(50)]
    wait_until(lambda: teacher.named("class_state")[-1]["students"] == 50)
    run_id = submit(teacher)["run_id"]
    for student in students:                                 # told which run to watch, as a page would watch it
        wait_until(lambda: student.named("class_state")[-1]["run_id"] == run_id)
        student.emit("watch", {"run_id": run_id})
    engine.let()
    finished = teacher.wait_for("run_finished", run_id)
    ticks = [p["t"] for p in teacher.named("tick", run_id)]
    assert ticks and finished["metrics"]["static"]["tokens"] == 7
    for student in students:
        student.wait_for("run_finished", run_id, timeout=30)
        assert [p["t"] for p in student.named("tick", run_id)] == ticks


def test_students_are_view_only_until_the_teacher_allows_and_then_queue_behind_the_teacher(gated, connect):
    app, engine = gated
    teacher, state = open_class(connect, app)
    code, token = state["code"], state["token"]
    a, b, c, d = (join(connect, app, code) for _ in range(4))
    refused = submit(a)
    assert refused["code"] == "view_only" and "not allowed" in refused["message"] and refused["field"] == "class"
    teacher.emit("class_allow", {"code": code, "token": token, "allow": True})
    wait_until(lambda: a.named("class_state")[-1]["allow_submit"])
    submit(connect(app), {**MIX, "name": "outsider"})        # executing (not preempted) while the class queues
    assert engine.entered.wait(10)
    queued = [submit(s, {**MIX, "name": f"student-{i}"})["run_id"] for i, s in enumerate((a, b, c))]
    assert [a.named("run_queued", queued[0])[-1]["position"], c.named("run_queued", queued[2])[-1]["ahead"]] == \
        [1, {"teacher": 0, "student": 2, "other": 0}]
    over = submit(d)
    assert over["code"] == "class_full" and "limit is 3 per class" in over["message"]
    mixed = submit(teacher, {**MIX, "name": "mixed"})        # submitted last, queued first
    assert mixed["position"] == 1 and mixed["ahead"] == {"teacher": 0, "student": 0, "other": 0}
    wait_until(lambda: a.named("run_queued", queued[0])[-1]["position"] == 2)
    assert a.named("run_queued", queued[0])[-1]["ahead"] == {"teacher": 1, "student": 0, "other": 0}
    wait_until(lambda: [r["role"] for r in teacher.named("class_state")[-1]["queued"]] == [TEACHER] + [STUDENT] * 3)
    engine.let()
    for s, run_id in zip((a, b, c), queued):
        s.wait_for("run_finished", run_id)
    assert engine.started == ["outsider", "mixed", "student-0", "student-1", "student-2"]


def ended(probe, run_id: str) -> dict:
    """`run_id`'s run_error or run_finished, whichever came (a cancel may come after the run finished)."""
    wait_until(lambda: probe.named("run_error", run_id) or probe.named("run_finished", run_id))
    return (probe.named("run_error", run_id) + probe.named("run_finished", run_id))[0]


def test_the_teacher_stops_any_student_run_locks_submits_and_is_outside_the_submit_rate_limit(make_app, connect):
    engine = GatedEngine()
    app = make_app({"CANCEL_GRACE_S": 60, "WATCHES_PER_MINUTE": 1000, "SUBMITS_PER_MINUTE": 3}, engine=engine)
    try:
        teacher, state = open_class(connect, app)
        code, token = state["code"], state["token"]
        a, b, c = (join(connect, app, code) for _ in range(3))
        teacher.emit("class_allow", {"code": code, "token": token, "allow": True})
        wait_until(lambda: c.named("class_state")[-1]["allow_submit"])
        executing = submit(a)["run_id"]
        assert engine.entered.wait(10)
        queued = submit(b)["run_id"]
        wait_until(lambda: [r["run_id"] for r in teacher.named("class_state")[-1]["running"]] == [executing]
                   and [r["run_id"] for r in teacher.named("class_state")[-1]["queued"]] == [queued])
        assert teacher.named("class_state")[-1]["running"][0] == {"run_id": executing, "role": STUDENT, "name": "tiny"}
        c.emit("class_cancel", {"code": code, "token": "x" * 32, "run_id": queued})   # a student may not
        assert c.wait_for("run_error")["code"] == "forbidden"
        teacher.emit("class_cancel", {"code": code, "token": token, "run_id": queued})
        teacher.emit("class_cancel", {"code": code, "token": token, "run_id": executing})
        engine.let()
        for probe, run_id in ((a, executing), (b, queued)):
            stopped = ended(probe, run_id)
            assert stopped["code"] == "cancelled" and "cancelled by the teacher" in stopped["message"], stopped
        outsider = connect(app)                                  # a run outside the class is not the teacher's to stop
        other = submit(outsider, {**MIX, "name": "outsider"})["run_id"]
        teacher.emit("class_cancel", {"code": code, "token": token, "run_id": other})
        wait_until(lambda: any(e.get("run_id") == other for e in teacher.named("run_error")))
        assert ended(outsider, other)["metrics"]["static"]["tokens"] == 7

        teacher.emit("class_lock", {"code": code, "token": token, "locked": True})
        wait_until(lambda: c.named("class_state")[-1]["locked"])
        refused = submit(c)
        assert refused["code"] == "locked" and refused["field"] == "class" and "locked submits" in refused["message"]
        teacher.emit("class_lock", {"code": code, "token": token, "locked": False})
        wait_until(lambda: not c.named("class_state")[-1]["locked"])

        refusals = len(teacher.named("run_error"))
        for i in range(12):                                      # 12 preset clicks: none refused by the limit of 3
            before = len(teacher.named("run_queued"))
            teacher.emit("submit", {"workload": {**MIX, "name": f"preset-{i}"}, "lanes": ["static", "continuous"]})
            wait_until(lambda: len(teacher.named("run_queued")) > before or len(teacher.named("run_error")) > refusals)
            assert len(teacher.named("run_error")) == refusals, teacher.named("run_error")[-1]
            run_id = teacher.named("run_queued")[-1]["run_id"]
            teacher.emit("cancel", {"run_id": run_id})
            refusals += ended(teacher, run_id).get("code") == "cancelled"
        answers = []                                             # a student keeps the limit (the locked try counted)
        for i in range(3):
            queued_before, errors_before = len(c.named("run_queued")), len(c.named("run_error"))
            c.emit("submit", {"workload": {**MIX, "name": f"student-{i}"}, "lanes": ["static"]})
            wait_until(lambda: len(c.named("run_queued")) > queued_before or len(c.named("run_error")) > errors_before)
            if len(c.named("run_queued")) > queued_before:
                answers.append("queued")
                ended(c, c.named("run_queued")[-1]["run_id"])
            else:
                answers.append(c.named("run_error")[-1]["code"])
        assert answers == ["queued", "queued", "rate_limited"]
    finally:
        engine.let()


def test_the_teachers_token_rejoins_as_teacher_and_a_guess_is_refused(gated, connect):
    app, _ = gated
    teacher, state = open_class(connect, app)
    teacher.disconnect()
    again = connect(app)
    again.emit("class_join", {"code": state["code"], "token": state["token"]})
    assert again.wait_for("class_state")["role"] == TEACHER
    guess = connect(app)
    guess.emit("class_join", {"code": state["code"], "token": "x" * 32})
    assert guess.wait_for("run_error")["code"] == "forbidden"
    student = join(connect, app, state["code"].lower())       # codes are read off a screen: any case
    assert student.named("class_state")[-1] == {**student.named("class_state")[-1], "role": STUDENT}
    assert "token" not in student.named("class_state")[-1]
    nobody = connect(app)
    nobody.emit("class_join", {"code": "ZZZZ9"})
    missing = nobody.wait_for("run_error")
    assert missing["code"] == "not_found" and missing["field"] == "code"


def test_closing_the_class_or_the_teacher_staying_away_tells_the_students(make_app, connect):
    app = make_app({"CLASS_GRACE_S": 0.5}, engine=Engine(None))
    teacher, state = open_class(connect, app)
    student = join(connect, app, state["code"])
    teacher.emit("class_close", {"code": state["code"], "token": state["token"]})
    assert "the teacher closed the class" in student.wait_for("class_closed")["message"]
    assert app.test_client().get(f"/c/{state['code']}").status_code == 404
    teacher2, state2 = open_class(connect, app)
    student2 = join(connect, app, state2["code"])
    teacher2.disconnect()
    assert "the teacher left" in student2.wait_for("class_closed", timeout=10)["message"]


def test_a_stored_run_the_teachers_page_shows_is_the_one_its_students_watch(make_app, connect):
    app = make_app({"WATCHES_PER_MINUTE": 1000}, engine=Engine(None))
    earlier = connect(app)                                   # a finished, stored run: a reference run, say
    run_id = submit(earlier)["run_id"]
    earlier.wait_for("run_finished", run_id)
    teacher, state = open_class(connect, app)
    code, token = state["code"], state["token"]
    student = join(connect, app, code)
    assert student.named("class_state")[-1]["run_id"] is None
    teacher.emit("class_show", {"code": code, "token": token, "run_id": run_id})
    wait_until(lambda: student.named("class_state")[-1]["run_id"] == run_id)
    student.emit("watch", {"run_id": run_id})                # as the student's page does on that class_state
    assert student.wait_for("run_finished", run_id)["metrics"] == earlier.named("run_finished", run_id)[-1]["metrics"]
    student.emit("class_show", {"code": code, "token": "x" * 32, "run_id": run_id})
    assert student.wait_for("run_error")["code"] == "forbidden"
    teacher.emit("class_show", {"code": code, "token": token, "run_id": "nosuchrun"})
    refused = teacher.wait_for("run_error")
    assert refused["code"] == "not_found" and refused["field"] == "run_id"


def test_without_a_class_a_submit_is_queued_as_before(make_app, connect):
    app = make_app(engine=Engine(None))
    probe = connect(app)
    queued = submit(probe)
    assert set(queued) == {"run_id", "position"}
