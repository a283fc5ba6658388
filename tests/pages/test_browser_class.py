"""A class in headless Chromium at 1280x720 against `python -m app` on the simulator, paced (`--pace 1`) so runs
take their simulated time and a queue forms: a teacher opens a class, three students join by the class link and
see the teacher's run; the teacher allows submits; the students start long runs, then the teacher starts `mixed`:
it is never queued behind a student's run (it runs next, while the students' later runs wait). The class QR code
carries the class link and, on a loopback server, says a phone cannot reach it. Every wait is on state the page
exposes (`window.__lanes`, `window.__class`, the DOM), never a sleep.
"""
import pytest

from tests.kit.browser import watched_context, watched_page
from tests.kit.page import H, W
from tests.kit.server import live_server

pytestmark = pytest.mark.browser
VIEW = {"viewport": {"width": W, "height": H}}


@pytest.fixture(scope="module")
def paced(browser, tmp_path_factory):
    with live_server("--backend", "sim", "--pace", "1", data_dir=tmp_path_factory.mktemp("data")) as url:
        yield url


def ready(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function("() => window.__lanes && window.__lanes.connected && window.__lanes.model.ready")


def klass(page, key: str):
    return page.evaluate(f"() => window.__class.{key}")


def status(page) -> str:
    return page.evaluate("() => window.__lanes.status")


def test_a_teacher_and_three_students_the_teachers_run_is_never_queued_behind_a_students(browser, paced):
    contexts = [watched_context(browser, **VIEW) for _ in range(4)]   # separate tabs' storage, as separate phones
    try:
        teacher, *students = (watched_page(c) for c in contexts)
        ready(teacher, paced)
        teacher.click("#btn-class")
        teacher.wait_for_function("() => window.__class.role === 'teacher'")
        code = klass(teacher, "code")
        assert "Class " + code in teacher.text_content("#class-info")

        teacher.click("#class-qr")                               # the class's QR code carries its link
        teacher.wait_for_selector("#class-qr-popover", state="visible")
        teacher.wait_for_function("() => { const i = document.getElementById('class-qr-img'); "
                                  "return i.complete && i.naturalWidth > 0; }")
        teacher.wait_for_function("() => document.getElementById('class-url').textContent.length > 0")
        assert teacher.text_content("#class-url") == f"{paced}/c/{code}"
        assert teacher.is_visible("#class-qr-warning")           # 127.0.0.1: this computer only
        assert "a phone cannot reach it" in teacher.text_content("#class-qr-warning")
        teacher.click("#class-qr-popover button")

        for student in students:                                 # join by the class link
            ready(student, f"{paced}/c/{code}")
            student.wait_for_function("() => window.__class.role === 'student'")
            assert not student.is_visible("#preset-buttons")     # view only
        teacher.wait_for_function("() => window.__class.students === 3")
        assert "3 students" in teacher.text_content("#class-info")

        teacher.click('button[data-preset="same"]')              # students follow the teacher's run
        teacher.wait_for_function("() => window.__lanes.runId && window.__lanes.mix === 'same'")
        run_id = teacher.evaluate("() => window.__lanes.runId")
        for student in students:
            student.wait_for_function("(id) => window.__lanes.runId === id && window.__lanes.mix === 'same'",
                                      arg=run_id, timeout=60_000)
        teacher.wait_for_function("() => window.__lanes.status === 'finished'", timeout=120_000)
        teacher.click("#btn-qr")                                 # the run's QR code says the same of 127.0.0.1
        teacher.wait_for_selector("#qr-warning", state="visible")
        assert "a phone cannot reach it" in teacher.text_content("#qr-warning")
        assert teacher.text_content("#qr-url") == f"{paced}/runs/{run_id}"
        teacher.click("#qr-close")

        teacher.check("#class-allow")
        for student, preset in zip(students, ("long-prompt", "memory-pressure", "poisson")):
            student.wait_for_selector(f'button[data-preset="{preset}"]', state="visible")
            student.click(f'button[data-preset="{preset}"]')
            student.wait_for_function("() => window.__lanes.own && ['queued', 'running'].includes(window.__lanes.status)")
        assert status(students[0]) == "running" and status(students[2]) == "queued"
        students[2].wait_for_function("() => /behind 1 student run/.test(document.getElementById('run-status').textContent)")

        teacher.click('button[data-preset="mixed"]')              # while the first student's run executes
        teacher.wait_for_function("(old) => window.__lanes.own && window.__lanes.status === 'queued' && "
                                  "window.__lanes.runId !== old", arg=run_id)
        assert teacher.text_content("#run-status") == "Queued: position 1 \u2014 next, once the running run ends."
        students[1].wait_for_function("() => /position 2 \u2014 behind the teacher's run\\./.test("
                                      "document.getElementById('run-status').textContent)")
        assert "behind the teacher's run and 1 student run" in students[2].text_content("#run-status")
        assert [r["role"] for r in klass(teacher, "queued")] == ["teacher", "student", "student"]
        teacher.wait_for_function("() => window.__lanes.mix === 'mixed' && window.__lanes.status !== 'queued'",
                                  timeout=180_000)
        assert status(students[1]) == "queued" and status(students[2]) == "queued"  # it ran next

        teacher.reload()                                         # the tab keeps its token: still the teacher
        teacher.wait_for_function("() => window.__class && window.__class.role === 'teacher'")
        assert klass(teacher, "code") == code and teacher.is_visible("#class-close")
        teacher.click("#class-close")                            # students are told, and their pages stay usable
        for student in students:
            student.wait_for_function("() => /ended: the teacher closed the class/.test("
                                      "document.getElementById('class-info').textContent)")
            assert klass(student, "role") is None
        assert [p for c in contexts for p in c.problems] == []   # no console error, no exception
        assert teacher.evaluate("() => window.__csp") == [] and students[0].evaluate("() => window.__csp") == []
    finally:
        for c in contexts:
            c.close()


def test_a_class_link_without_an_open_class_says_so(browser, paced):
    context = watched_context(browser, **VIEW)
    try:
        page = watched_page(context)
        ready(page, f"{paced}/c/NOP3Q")
        assert "No class NOP3Q is open" in page.text_content("#class-info")
        assert page.is_visible("#btn-class")                      # any page may open a class of its own
        assert all("404" in p for p in context.problems)           # only the page's own status
    finally:
        context.close()


def test_in_a_class_only_the_teacher_records_a_reference_and_a_student_never_sees_the_button(browser, paced):
    contexts = [watched_context(browser, **VIEW) for _ in range(2)]
    try:
        teacher, student = (watched_page(c) for c in contexts)
        ready(teacher, paced)
        teacher.click("#btn-class")
        teacher.wait_for_function("() => window.__class.role === 'teacher'")
        code = klass(teacher, "code")
        ready(student, f"{paced}/c/{code}")
        student.wait_for_function("() => window.__class.role === 'student'")
        teacher.check("#class-allow")                             # even a student who may submit records nothing
        student.wait_for_selector('button[data-preset="same"]', state="visible")
        student.click('button[data-preset="same"]')
        student.wait_for_function("() => window.__lanes.own && window.__lanes.status === 'finished'", timeout=120_000)
        own = student.evaluate("() => window.__lanes.runId")
        assert student.is_hidden("#record-reference")
        assert student.url == f"{paced}/c/{code}"                 # a reload still joins the class
        teacher.click('button[data-preset="same"]')
        teacher.wait_for_function("() => window.__lanes.own && window.__lanes.mix === 'same' "
                                  "&& window.__lanes.status === 'finished'", timeout=120_000)
        assert teacher.is_visible("#record-reference")
        teacher.click("#record-reference")                        # a live run, kept once it finishes
        teacher.wait_for_function("() => /Kept as the reference run of/.test("
                                  "document.getElementById('reference-mark').textContent)", timeout=180_000)
        assert "same" in teacher.evaluate("() => fetch('/api/references').then((r) => r.json())")["references"]
        student.wait_for_function("() => !window.__lanes.own")                 # it followed the teacher's runs
        teacher.goto(f"{paced}/runs/{own}")      # a stored run's page, as "Play the reference run" opens one
        teacher.wait_for_function("() => window.__class && window.__class.role === 'teacher'")
        student.wait_for_function("(id) => window.__lanes.runId === id && window.__lanes.status === 'finished'",
                                  arg=own)                                    # the class sees what the teacher shows
        assert [p for c in contexts for p in c.problems] == []
    finally:
        for c in contexts:
            c.close()
