"""Predict, then reveal — with the class's answers (issue 38), in headless Chromium at 1280x720 against `python -m app`
on the simulator (the same schedulers and step records; a run's step counts are the real model's): the teacher asks
"which lane finishes first?", three students answer on their pages (one changes its mind), the teacher's screen shows
the tally 3 of 3, the teacher runs `mixed`, and at the reveal the tally stands beside the run's own figure, the one
the metrics table shows. Every wait is on state the page exposes (`window.__class`, the DOM), never a sleep.
Screenshots go to artifacts/.
"""
import pytest

from tests.kit.browser import ARTIFACTS, watched_context, watched_page
from tests.kit.page import H, W, metric

pytestmark = pytest.mark.browser
VIEW = {"viewport": {"width": W, "height": H}}


def ready(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function("() => window.__lanes && window.__lanes.connected && window.__lanes.model.ready")


def test_three_students_answer_the_teacher_sees_the_tally_and_the_reveal_sets_it_beside_the_runs_figure(browser, server):
    contexts = [watched_context(browser, **VIEW) for _ in range(4)]   # separate storage, as separate phones
    ARTIFACTS.mkdir(exist_ok=True)
    teacher, *students = (watched_page(c) for c in contexts)
    code = None
    try:
        ready(teacher, server)
        teacher.click("#btn-class")
        teacher.wait_for_function("() => window.__class.role === 'teacher'")
        code = teacher.evaluate("() => window.__class.code")
        for student in students:
            ready(student, f"{server}/c/{code}")
            student.wait_for_function("() => window.__class.role === 'student'")
        teacher.wait_for_function("() => window.__class.students === 3")

        teacher.click("#poll-ask")                       # no run on screen yet: the teacher names the lanes
        assert teacher.input_value("#poll-question") == "Which lane finishes first?"
        teacher.fill("#poll-choices", "static")           # refused with a message, in the form, which stays open
        teacher.click("#poll-submit")
        teacher.wait_for_function("() => /2 to 8 choices/.test(document.getElementById('poll-form-error').textContent)")
        teacher.fill("#poll-choices", "static, continuous")
        teacher.screenshot(path=str(ARTIFACTS / "poll-teacher-ask.png"))
        teacher.click("#poll-submit")
        for student, choice in zip(students, ("continuous", "continuous", "continuous")):
            student.wait_for_selector(f'#poll-answers button:text-is("{choice}")')
            assert student.text_content("#poll-q") == "Which lane finishes first?"
            assert student.is_hidden("#poll-tally")          # nobody sees the class's answers while they are open
            student.click(f'#poll-answers button:text-is("{choice}")')
        students[2].wait_for_function("() => window.__class.poll.yours === 1")
        students[2].click('#poll-answers button:text-is("static")')   # it changes its mind: one answer each
        students[2].wait_for_function("() => window.__class.poll.yours === 0")
        assert students[2].get_attribute('#poll-answers button:text-is("static")', "aria-pressed") == "true"
        assert "Your answer: static" in students[2].text_content("#poll-note")
        students[2].screenshot(path=str(ARTIFACTS / "poll-student-answer.png"))

        teacher.wait_for_function("() => window.__class.poll && window.__class.poll.tally.answered === 3")
        assert teacher.text_content("#poll-count") == "3 of 3 students answered"
        assert teacher.text_content("#poll-tally") == "The class: static 1 \u00b7 continuous 2"
        assert teacher.is_hidden("#poll-reveal")
        teacher.screenshot(path=str(ARTIFACTS / "poll-teacher-tally.png"))

        teacher.click('button[data-preset="mixed"]')     # the poll's run: its start closes the answers
        teacher.wait_for_function("() => window.__lanes.mix === 'mixed' && window.__lanes.status === 'finished'")
        students[0].wait_for_function("() => window.__class.poll && !window.__class.poll.open")
        assert students[0].is_hidden("#poll-answers button") and "Answers are closed" in students[0].text_content("#poll-note")
        teacher.keyboard.press("End")                    # the reveal: the playhead at the run's end
        teacher.wait_for_function("() => window.__class.poll.revealed")
        steps = {lane: metric(teacher, lane, "steps") for lane in ("static", "continuous")}   # the page's own figures
        assert steps == {"static": "15", "continuous": "9"}
        assert teacher.text_content("#poll-reveal") == ("The run: continuous first by steps: 9 steps (static 15 steps)"
                                                        " \u2014 2 of 3 answered continuous")
        assert teacher.text_content("#poll-tally") == "The class: static 1 \u00b7 continuous 2"
        assert teacher.text_content("#poll-count") == "3 of 3 students answered \u00b7 answers closed"
        teacher.screenshot(path=str(ARTIFACTS / "poll-teacher-reveal.png"))

        students[0].wait_for_function("() => window.__lanes.mix === 'mixed' && window.__lanes.status === 'finished'")
        students[0].keyboard.press("End")                # a student's page reveals the same, the tally beside it
        students[0].wait_for_function("() => window.__class.poll.revealed")
        assert students[0].text_content("#poll-reveal") == teacher.text_content("#poll-reveal")
        assert [p for c in contexts for p in c.problems] == []   # no console error, no exception
    finally:
        if code:                                         # the shared server: no class left open for other tests
            teacher.click("#class-close")
        for c in contexts:
            c.close()
