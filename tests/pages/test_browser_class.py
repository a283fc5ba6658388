"""A class in headless Chromium at 1280x720 against `python -m app` on the simulator, paced (`--pace 1`) so runs
take their simulated time and a queue forms, with a submit limit of 4 a minute: a teacher opens a class (its code
large beside the class QR), three students join by the class link; one student's run executes, one's is queued, one
only watches; the teacher's run is never queued behind a student's, and every student page shows it with its
preset and lesson (a student's own run one click away); the teacher stops a student's executing run, locks submits
(a locked submit is refused with a message), and clicks 12 presets quickly without a refusal. The class QR code
carries the class link and, on a loopback server, says a phone cannot reach it. Every wait is on state the page
exposes (`window.__lanes`, `window.__class`, the DOM), never a sleep. Screenshots go to artifacts/.
"""
import pytest

from tests.kit.browser import ARTIFACTS, watched_context, watched_page
from tests.kit.page import H, W
from tests.kit.server import live_server

pytestmark = pytest.mark.browser
VIEW = {"viewport": {"width": W, "height": H}}


@pytest.fixture(scope="module")
def paced(browser, tmp_path_factory):
    with live_server("--backend", "sim", "--pace", "1", "--limit", "submits_per_minute=4",
                     data_dir=tmp_path_factory.mktemp("data")) as url:
        yield url


def ready(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function("() => window.__lanes && window.__lanes.connected && window.__lanes.model.ready")


def klass(page, key: str):
    return page.evaluate(f"() => window.__class.{key}")


def status(page) -> str:
    return page.evaluate("() => window.__lanes.status")


def lesson_of(page) -> str:
    return page.text_content("#lesson")


def pressed(page) -> list[str]:
    return page.eval_on_selector_all('#preset-buttons button[aria-pressed="true"]', "bs => bs.map(b => b.dataset.preset)")


def test_a_class_follows_its_teacher_who_stops_student_runs_locks_submits_and_is_never_rate_limited(browser, paced):
    """A teacher and three students: one whose run executes, one whose run is queued, one who only watches. All three
    show the teacher's run with its preset, lesson and controls (a student's own run one click away, marked as
    theirs); the teacher's run never queues behind a student's; the teacher stops the executing student run;
    a locked submit is refused with a message and stops nothing; 12 quick teacher preset clicks never stop the run
    on screen (the server's limit is 4 submits a minute: a class's teacher is outside it)."""
    contexts = [watched_context(browser, **VIEW) for _ in range(4)]   # separate tabs' storage, as separate phones
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        teacher, ran, queued, watcher = (watched_page(c) for c in contexts)
        students = [ran, queued, watcher]
        ready(teacher, paced)
        teacher.click("#btn-class")
        teacher.wait_for_function("() => window.__class.role === 'teacher'")
        code = klass(teacher, "code")
        assert teacher.text_content("#class-code") == code and f"/c/{code}" in teacher.text_content("#class-info")

        teacher.click("#class-qr")                               # the class's QR code carries its link
        teacher.wait_for_selector("#class-qr-popover", state="visible")
        teacher.wait_for_function("() => { const i = document.getElementById('class-qr-img'); "
                                  "return i.complete && i.naturalWidth > 0; }")
        teacher.wait_for_function("() => document.getElementById('class-url').textContent.length > 0")
        assert teacher.text_content("#class-url") == f"{paced}/c/{code}"
        assert teacher.text_content("#class-code-big") == code   # large enough to copy off a projector
        assert teacher.eval_on_selector("#class-code-big", "n => parseFloat(getComputedStyle(n).fontSize)") >= 48
        assert teacher.is_visible("#class-qr-warning")           # 127.0.0.1: this computer only
        assert "a phone cannot reach it" in teacher.text_content("#class-qr-warning")
        teacher.screenshot(path=str(ARTIFACTS / "class-teacher-code.png"))
        teacher.click("#class-qr-popover button")

        for student in students:                                 # join by the class link
            ready(student, f"{paced}/c/{code}")
            student.wait_for_function("() => window.__class.role === 'student'")
            assert not student.is_visible("#preset-buttons")     # view only: no "pick a preset above" either
            student.wait_for_function("() => /the teacher's run shows here/.test(document.getElementById('empty')"
                                      ".textContent)")
            assert "preset" not in (student.text_content("#lesson") + student.text_content("#empty")).lower()
        teacher.wait_for_function("() => window.__class.students === 3")
        assert "3 students" in teacher.text_content("#class-info")

        teacher.check("#class-allow")
        for student, preset in ((ran, "long-prompt"), (queued, "memory-pressure")):
            student.wait_for_selector(f'button[data-preset="{preset}"]', state="visible")
            student.click(f'button[data-preset="{preset}"]')
            student.wait_for_function("() => window.__lanes.own && ['queued', 'running'].includes(window.__lanes.status)")
        ran.wait_for_function("() => window.__lanes.status === 'running'")
        mine = [s.evaluate("() => window.__lanes.runId") for s in (ran, queued)]
        teacher.wait_for_function("(id) => window.__class.running.some((r) => r.run_id === id)", arg=mine[0])

        teacher.click('button[data-preset="one-long"]')          # while the first student's run executes
        teacher.wait_for_function("() => window.__lanes.own && window.__lanes.status === 'queued' && window.__lanes.runId")
        assert teacher.text_content("#run-status") == "Queued: position 1 \u2014 next, once the running run ends."
        run_id = teacher.evaluate("() => window.__lanes.runId")
        for student in students:                                 # all three show it, whoever ran or queued
            student.wait_for_function("(id) => window.__lanes.runId === id", arg=run_id)
            assert student.text_content("#class-view") == "Showing the teacher's run"
        assert [r["role"] for r in klass(teacher, "queued")] == ["teacher", "student"]
        queued.wait_for_function("() => /your run \u201cmemory-pressure\u201d: queued, position 2/.test("
                                 "document.getElementById('class-show-mine').textContent)")
        assert watcher.is_hidden("#class-show-mine")             # it has no run of its own
        ran.wait_for_function("() => /your run \u201clong-prompt\u201d: running/.test("
                              "document.getElementById('class-show-mine').textContent)")

        stop = teacher.locator(f'#class-runs button[data-run="{mine[0]}"]')   # the teacher stops the executing run
        assert "(running)" in teacher.locator("#class-runs .class-run").first.text_content()
        stop.click()
        ran.wait_for_function("() => /stopped by the teacher/.test(document.getElementById('class-show-mine').textContent)")
        teacher.wait_for_function("() => window.__lanes.mix === 'one-long' && window.__lanes.status !== 'queued'",
                                  timeout=60_000)
        assert status(queued) != "error" and klass(queued, "run_id") == run_id   # the teacher's ran next
        lesson = lesson_of(teacher)
        for student in students:                                 # its preset, lesson and controls
            student.wait_for_function("() => window.__lanes.mix === 'one-long' && window.__lanes.status !== 'queued'")
            student.wait_for_function("(text) => document.getElementById('lesson').textContent === text", arg=lesson)
            assert student.is_visible("#btn-play") and student.is_visible("#btn-present")
        assert pressed(ran) == ["one-long"] and pressed(queued) == ["one-long"]  # not the student's own preset
        queued.screenshot(path=str(ARTIFACTS / "class-student-follows.png"))

        queued.click("#class-show-mine")                         # its own run, one click away, marked as its own
        queued.wait_for_function("(id) => window.__lanes.runId === id && window.__lanes.own", arg=mine[1])
        assert queued.text_content("#class-view") == "Showing your own run"
        assert "memory-pressure" in lesson_of(queued) or pressed(queued) == ["memory-pressure"]
        queued.screenshot(path=str(ARTIFACTS / "class-student-own.png"))
        queued.click("#class-show-teacher")
        queued.wait_for_function("(id) => window.__lanes.runId === id", arg=run_id)
        assert queued.text_content("#class-view") == "Showing the teacher's run"

        teacher.check("#class-lock")                             # locked: a submit is refused with a message
        watcher.wait_for_function("() => window.__class.locked")
        watcher.click('button[data-preset="same"]')
        watcher.wait_for_function("() => /locked submits/.test(document.getElementById('run-status').textContent)")
        assert "\u201csame\u201d did not start" in watcher.text_content("#run-status")
        assert watcher.evaluate("() => window.__lanes.runId") == run_id and status(watcher) != "error"
        teacher.uncheck("#class-lock")
        watcher.wait_for_function("() => !window.__class.locked")

        names = ["same", "mixed", "one-long"] * 4                # 12 quick clicks, each a submit of its own
        for i, name in enumerate(names):
            teacher.click(f'button[data-preset="{name}"]')
            teacher.wait_for_function("([name, old]) => window.__lanes.own && window.__lanes.mix === name && "
                                      "window.__lanes.runId !== old && ['queued', 'running', 'finished'].includes("
                                      "window.__lanes.status)", arg=[name, run_id])
            run_id = teacher.evaluate("() => window.__lanes.runId")
            assert not teacher.evaluate("() => window.__lanes.error"), teacher.text_content("#run-status")
        teacher.wait_for_function("() => window.__lanes.status === 'finished'", timeout=120_000)
        assert teacher.evaluate("() => window.__lanes.mix") == "one-long"
        for student in students:
            student.wait_for_function("(id) => window.__lanes.runId === id", arg=run_id)
        teacher.screenshot(path=str(ARTIFACTS / "class-teacher.png"))
        previous = None                                          # a student keeps the limit of 4 a minute, and the
        for name in ["same", "mixed", "one-long", "same"]:        # refusal of a 5th stops nothing
            watcher.click(f'button[data-preset="{name}"]')
            watcher.wait_for_function("([name, old]) => window.__lanes.own && window.__lanes.mix === name && "
                                      "window.__lanes.runId !== old", arg=[name, previous])
            previous = watcher.evaluate("() => window.__lanes.runId")
        watcher.click('button[data-preset="mixed"]')
        watcher.wait_for_function("() => /too many submits/.test(document.getElementById('run-status').textContent)")
        assert "\u201cmixed\u201d did not start; the lanes show \u201csame\u201d." in watcher.text_content("#run-status")
        assert watcher.evaluate("() => window.__lanes.runId") == previous
        assert status(watcher) in ("queued", "running", "finished")
        teacher.click("#btn-qr")                                 # the run's QR code says the same of 127.0.0.1
        teacher.wait_for_selector("#qr-warning", state="visible")
        assert "a phone cannot reach it" in teacher.text_content("#qr-warning")
        assert teacher.text_content("#qr-url") == f"{paced}/runs/{run_id}"
        teacher.click("#qr-close")

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
