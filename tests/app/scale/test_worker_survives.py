"""An engine worker whose run book fails mid-run (Redis dropping, as issue 22 saw) keeps its thread: the run
that could not even be ended is logged, and the next run is taken and finishes. Before, `book.end()` in the
run loop's except path raised outside the `try` and the worker thread died. The simulator, in one process."""
import time

from engine import Engine

MIXED = {"slots": 2, "requests": [{"id": "A", "prompt": "Say hi.", "max_new_tokens": 4},
                                  {"id": "B", "prompt": "Count.", "max_new_tokens": 3}]}


def test_a_book_that_fails_during_a_run_and_at_its_end_does_not_stop_the_worker(make_app, connect):
    app = make_app(engine=Engine(None))
    book, worker = app.extensions["book"], app.extensions["worker"]
    publish, end, failed = book.publish, book.end, []

    def failing_publish(job, event, payload):
        if not failed and event == "tick":
            failed.append(job.run_id)
            raise ConnectionError("the book went away mid-run")
        return publish(job, event, payload)

    def failing_end(job, status, reason):
        if job.run_id in failed:
            raise ConnectionError("the book is still away")
        return end(job, status, reason)
    book.publish, book.end = failing_publish, failing_end

    first, second = connect(app), connect(app)
    first.emit("submit", {"workload": MIXED})
    deadline = time.monotonic() + 30
    while not failed:
        assert time.monotonic() < deadline, "the first run never ticked"
        time.sleep(0.02)
    second.emit("submit", {"workload": MIXED})
    run_id = second.wait_for("run_queued", timeout=30)["run_id"]
    assert second.wait_for("run_finished", run_id, timeout=60)["metrics"]["continuous"]["tokens"] == 7
    assert worker._task.is_alive()
