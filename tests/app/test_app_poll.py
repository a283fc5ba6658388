"""A class's poll (app.runs.polls): the teacher asks, each student answers once (again: replaced), the teacher sees the
tally and never who answered what; bad input is refused with a message; the poll's run closes it; the answers end with
the class. The rules in the memory classes and in the Redis classes (a real redis-server), then over the socket layer."""
import pytest

from app.protocol import Rejected
from app.runs.job import RUN, TEACHER, Job
from app.runs.polls import CHOICE, NUMBER, Poll, check_answer, new_poll, tally
from engine import Engine
from tests.app.test_app_class import wait_until
from tests.kit.class_store import class_store

LANES = ["static", "continuous"]
FIRST = {"metric": "steps"}                                    # which lane finishes first: the fewest steps
TTFT = {"metric": "mean_ttft_steps", "lane": "continuous"}


# -- the poll alone --------------------------------------------------------------------------------------

def test_a_choice_tally_counts_each_choice_and_a_number_tally_gives_the_median_and_the_middle_half():
    choice = new_poll(1, " Which lane finishes first? ", CHOICE, LANES, FIRST)
    assert (choice.question, choice.choices, choice.figure) == ("Which lane finishes first?", LANES, FIRST)
    choice.answers = {"a": 1, "b": 1, "c": 0}
    assert tally(choice) == {"answered": 3, "counts": [1, 2]}
    number = new_poll(2, "continuous's mean TTFT in steps?", NUMBER, None, TTFT)
    assert tally(number) == {"answered": 0, "median": None, "q1": None, "q3": None, "low": None, "high": None}
    number.answers = {"a": 2, "b": 3.5, "c": 9, "d": 4}
    assert tally(number) == {"answered": 4, "median": 3.75, "q1": 3.125, "q3": 5.25, "low": 2, "high": 9}
    number.answers = {"a": 2.5}
    assert tally(number) == {"answered": 1, "median": 2.5, "q1": 2.5, "q3": 2.5, "low": 2.5, "high": 2.5}


@pytest.mark.parametrize("args, field, words", [
    (("", CHOICE, LANES, None), "question", "must be some text"),
    (("x" * 201, CHOICE, LANES, None), "question", "201 characters long; the limit is 200"),
    (("Q?", "poem", LANES, None), "kind", "kind must be"),
    (("Q?", CHOICE, ["only one"], None), "choices", "2 to 8 choices"),
    (("Q?", CHOICE, "static,continuous", None), "choices", "2 to 8 choices"),
    (("Q?", CHOICE, ["a"] * 9, None), "choices", "2 to 8 choices"),
    (("Q?", CHOICE, ["same", "same "], None), "choices", "say the same"),
    (("Q?", CHOICE, ["ok", "y" * 41], None), "choices", "limit is 40"),
    (("Q?", NUMBER, LANES, None), "choices", "no choices"),
    (("Q?", NUMBER, None, {"metric": "DROP TABLE"}), "figure.metric", "metric's key"),
    (("Q?", NUMBER, None, {"metric": "steps", "who": 1}), "figure", "{metric, lane?}"),
    (("Q?", NUMBER, None, {"metric": "steps"}), "figure.lane", "names its lane"),
])
def test_a_question_that_cannot_be_a_poll_is_refused_naming_its_field(args, field, words):
    with pytest.raises(Rejected) as refused:
        new_poll(1, *args)
    assert refused.value.field == field and words in refused.value.message


@pytest.mark.parametrize("poll_id, value, code, words", [
    (2, 0, "not_found", "not the class's poll"),
    (1, 2, "invalid", "no choice 2"),
    (1, -1, "invalid", "no choice -1"),
    (1, 0.5, "invalid", "no choice 0.5"),
    (1, True, "invalid", "finite number"),
    (1, "0", "invalid", "finite number"),
    (1, float("nan"), "invalid", "finite number"),
    (1, float("inf"), "invalid", "finite number"),
])
def test_an_answer_that_cannot_be_one_is_refused_with_a_message(poll_id, value, code, words):
    poll = new_poll(1, "Which lane finishes first?", CHOICE, LANES, FIRST)
    with pytest.raises(Rejected) as refused:
        check_answer(poll, poll_id, value)
    assert (refused.value.code, refused.value.field == "answer" or code != "invalid") == (code, True)
    assert words in refused.value.message
    poll.open = False
    with pytest.raises(Rejected, match="the poll is closed"):
        check_answer(poll, 1, 0)
    with pytest.raises(Rejected, match="too far from 0"):
        check_answer(Poll(1, "How many?", NUMBER, []), 1, 1e13)


# -- the rules of a class's poll, in memory and in Redis ------------------------------------------------------

@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def classes(request, tmp_path):
    yield from class_store(request.param, tmp_path, max_students=50)


def polls_sent(sends) -> dict:
    """{recipient: the poll in the class_state it is sent}."""
    return {s.to: s.payload["poll"] for s in sends if s.event == "class_state"}


def test_one_answer_per_student_the_teacher_sees_only_the_tally_and_the_poll_ends_with_its_class(classes):
    code = classes.open("teacher", [])[0].payload["code"]
    token = classes.open("teacher", [])[0].payload["token"]
    for sid in ("s1", "s2", "s3"):
        classes.join(sid, code, None, [])
    asked = polls_sent(classes.ask("teacher", code, token, "Which lane finishes first?", CHOICE, LANES, FIRST, []))
    assert asked[f"class:{code}"] == {"id": 1, "question": "Which lane finishes first?", "kind": CHOICE, "choices": LANES,
                                      "figure": FIRST, "open": True, "run_id": None}       # no tally while open
    assert asked["teacher"]["tally"] == {"answered": 0, "counts": [0, 0]}
    classes.answer("s1", "client-1", code, 1, 0, [])
    classes.answer("s2", "client-2", code, 1, 1, [])
    sent = polls_sent(classes.answer("s1", "client-1", code, 1, 1, []))   # again: replaces the first answer
    assert sent["s1"]["yours"] == 1 and "tally" not in sent["s1"]
    sent = polls_sent(classes.answer("s3", "client-3", code, 1, 0, []))
    assert sent["teacher"]["tally"] == {"answered": 3, "counts": [1, 2]}
    assert "client-1" not in str(sent["teacher"]) and "s1" not in str(sent["teacher"])   # who answered: never sent

    for who, act, code_ in (("s1", lambda: classes.ask("s1", code, "x" * 32, "Mine?", NUMBER, None, None, []), "forbidden"),
                            ("s1", lambda: classes.close_poll("s1", code, "x" * 32, []), "forbidden"),
                            ("teacher", lambda: classes.answer("teacher", "t", code, 1, 0, []), "forbidden"),
                            ("outsider", lambda: classes.answer("outsider", "o", code, 1, 0, []), "forbidden")):
        with pytest.raises(Rejected) as refused:
            act()
        assert refused.value.code == code_, who

    closed = polls_sent(classes.close_poll("teacher", code, token, []))
    assert closed[f"class:{code}"]["tally"] == {"answered": 3, "counts": [1, 2]}   # the class sees the tally now
    with pytest.raises(Rejected, match="the poll is closed"):
        classes.answer("s2", "client-2", code, 1, 0, [])

    asked = polls_sent(classes.ask("teacher", code, token, "continuous's mean TTFT in steps?", NUMBER, None, TTFT, []))
    assert asked["teacher"]["id"] == 2 and asked["teacher"]["tally"]["answered"] == 0   # a new poll: new answers
    with pytest.raises(Rejected, match="not the class's poll"):
        classes.answer("s1", "client-1", code, 1, 3, [])
    classes.answer("s1", "client-1", code, 2, 2.375, [])
    sends = classes.submitted(Job(RUN, {"workload": {"name": "mixed"}}, "teacher", LANES, run_id="R1",
                                  class_code=code, role=TEACHER), [])
    assert polls_sent(sends)[f"class:{code}"] | {"tally": None} == {**asked["teacher"], "open": False, "run_id": "R1",
                                                                    "tally": None}   # its run closed it
    classes.close("teacher", code, token)
    with pytest.raises(Rejected, match="no open class"):
        classes.answer("s1", "client-1", code, 2, 3, [])
    assert classes.open("teacher", [])[0].payload["poll"] is None   # a new class starts without a poll


# -- over the socket layer ---------------------------------------------------------------------------------

def test_over_sockets_three_students_answer_and_bad_input_gets_a_run_error_not_a_crash(make_app, connect):
    app = make_app({"WATCHES_PER_MINUTE": 1000}, engine=Engine(None))
    teacher = connect(app, auth={"client": "teacher-page-1"})
    teacher.emit("class_open", {})
    state = teacher.wait_for("class_state")
    code, token = state["code"], state["token"]
    students = [connect(app, auth={"client": f"student-page-{i}"}) for i in range(3)]
    for s in students:
        s.emit("class_join", {"code": code})
        s.wait_for("class_state")
    teacher.emit("poll_open", {"code": code, "token": token, "question": "Which lane finishes first?", "kind": CHOICE,
                               "choices": LANES, "figure": FIRST})
    for s, choice in zip(students, (1, 1, 0)):
        s.emit("poll_answer", {"code": code, "poll": 1, "answer": choice})
    polls = lambda: [p["poll"] for p in teacher.named("class_state") if p.get("poll")]   # noqa: E731
    wait_until(lambda: polls() and polls()[-1]["tally"]["answered"] == 3)
    assert polls()[-1]["tally"]["counts"] == [1, 2]

    student = students[0]
    bad = [(student, "poll_answer", {"code": code, "poll": 1, "answer": 7}, "no choice 7"),
           (student, "poll_answer", {"code": code, "poll": 9, "answer": 0}, "not the class's poll"),
           (student, "poll_answer", {"code": code, "poll": 1, "answer": "static"}, "finite number"),
           (student, "poll_answer", {"code": code, "poll": 1}, "poll_answer takes one object"),
           (student, "poll_open", {"code": code, "token": "x" * 32, "question": "Mine?", "kind": NUMBER}, "only the teacher"),
           (student, "poll_close", {"code": code, "token": "x" * 32}, "only the teacher"),
           (teacher, "poll_answer", {"code": code, "poll": 1, "answer": 0}, "only a student"),
           (teacher, "poll_open", {"code": code, "token": token, "question": "x" * 500, "kind": CHOICE,
                                   "choices": LANES}, "limit is 200")]
    for who, event, payload, words in bad:
        before = len(who.named("run_error"))
        who.emit(event, payload)
        wait_until(lambda: len(who.named("run_error")) > before)
        assert words in who.named("run_error")[-1]["message"], (payload, who.named("run_error")[-1])
    teacher.emit("poll_close", {"code": code, "token": token})
    wait_until(lambda: not students[2].named("class_state")[-1]["poll"]["open"])
    assert students[2].named("class_state")[-1]["poll"]["tally"]["counts"] == [1, 2]
