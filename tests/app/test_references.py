"""Reference runs over HTTP on the simulator: a finished, stored run of a preset recorded as its reference, kept
across a restart on the same data dir, recorded again, and every refusal naming its field."""
import json
from datetime import datetime, timezone

import pytest

from app.protocol import Rejected
from app.runs.references import ReferenceBook
from engine.engine import Engine
from tests.kit import ROOT
from tests.kit.class_store import class_store



def finished_run(app, connect, preset: str) -> str:
    probe = connect(app)
    probe.emit("submit", {"workload": json.loads((ROOT / "demos" / f"{preset}.json").read_text())})
    run_id = probe.wait_for("run_queued")["run_id"]
    assert probe.wait_for("run_finished", run_id, timeout=60)["stored"] is True
    return run_id


def test_a_recorded_reference_survives_a_restart_and_is_replaced_by_recording_again(make_app, connect, tmp_path):
    app = make_app(engine=Engine(None))
    first = finished_run(app, connect, "arrivals")
    http = app.test_client()
    assert http.get("/api/references").get_json() == {"references": {}}
    answer = http.post("/api/references/arrivals", json={"run_id": first})
    assert answer.status_code == 200 and answer.get_json()["run_id"] == first
    recorded_at = answer.get_json()["recorded_at"]
    datetime.strptime(recorded_at, "%Y-%m-%dT%H:%M:%SZ")  # a UTC timestamp
    restarted = make_app(engine=Engine(None))  # a restart: a new server on the same data dir
    again = restarted.test_client()
    assert again.get("/api/references").get_json()["references"] == {"arrivals": {"run_id": first, "recorded_at": recorded_at}}
    assert again.get(f"/api/runs/{first}").get_json()["lanes"] == ["static", "dynamic", "continuous"]
    second = finished_run(restarted, connect, "arrivals")
    assert again.post("/api/references/arrivals", json={"run_id": second}).status_code == 200
    assert again.get("/api/references").get_json()["references"]["arrivals"]["run_id"] == second


def test_a_reference_must_be_a_stored_run_of_that_preset_and_errors_name_the_field(make_app, connect):
    app = make_app(engine=Engine(None))
    run_id = finished_run(app, connect, "same")
    http = app.test_client()
    for body, status, field in (({}, 400, "run_id"), ({"run_id": 7}, 400, "run_id"), ({"run_id": "../x"}, 400, "run_id"),
                                ({"run_id": "AAAAAAAAAAAA"}, 404, "run_id"), ({"run_id": run_id}, 400, "run_id")):
        answer = http.post("/api/references/arrivals", json=body)  # the last: a run of "same", not of "arrivals"
        assert (answer.status_code, answer.get_json()["field"]) == (status, field), body
    assert http.post("/api/references/no-such-preset", json={"run_id": run_id}).status_code == 404
    assert http.post("/api/references/same", data="not json").status_code == 400
    assert http.get("/api/references").get_json() == {"references": {}}


def test_the_reference_file_is_written_whole_and_records_utc(tmp_path):
    book = ReferenceBook(tmp_path / "data" / "references.json")
    ref = book.record("mixed", "AAAAAAAAAAAA", now=datetime(2026, 12, 1, 22, 10, 5, tzinfo=timezone.utc))
    assert ref == {"run_id": "AAAAAAAAAAAA", "recorded_at": "2026-12-01T22:10:05Z"}
    book.record("same", "BBBBBBBBBBBB")
    assert set(book.all()) == {"mixed", "same"} and list((tmp_path / "data").iterdir()) == [book.path]


def test_a_run_of_a_preset_whose_prompt_lost_its_newlines_in_the_editor_is_still_its_run(make_app, connect):
    app = make_app(engine=Engine(None))
    obj = json.loads((ROOT / "demos" / "long-prompt.json").read_text())
    assert "\n" in obj["requests"][3]["prompt"]
    obj["requests"][3]["prompt"] = obj["requests"][3]["prompt"].replace("\n", "")  # what the page's prompt field sends
    probe = connect(app)
    probe.emit("submit", {"workload": obj})
    run_id = probe.wait_for("run_queued")["run_id"]
    probe.wait_for("run_finished", run_id, timeout=60)
    assert app.test_client().post("/api/references/long-prompt", json={"run_id": run_id}).status_code == 200


def test_while_a_class_is_open_only_its_teacher_may_record_and_a_student_is_told_why(make_app, connect):
    app = make_app(engine=Engine(None))
    run_id = finished_run(app, connect, "same")
    teacher = connect(app)
    teacher.emit("class_open", {})
    state = teacher.wait_for("class_state")
    http = app.test_client()
    for body in ({"run_id": run_id}, {"run_id": run_id, "class": state["code"]},
                 {"run_id": run_id, "class": state["code"], "token": "x" * 32}):
        answer = http.post("/api/references/same", json=body)   # nobody's page, a student's, a guessed token
        assert (answer.status_code, answer.get_json()["field"]) == (403, "token"), body
        assert "only its teacher may record a reference run" in answer.get_json()["error"]
    student = http.post("/api/references/same", json={"run_id": run_id, "class": state["code"]}).get_json()
    assert student["error"].startswith(f"class {state['code']} is open")
    assert http.get("/api/references").get_json() == {"references": {}}
    mine = {"run_id": run_id, "class": state["code"], "token": state["token"]}
    assert http.post("/api/references/same", json=mine).status_code == 200
    teacher.emit("class_close", {"code": state["code"], "token": state["token"]})
    teacher.wait_for("class_closed")
    assert http.post("/api/references/same", json={"run_id": run_id}).status_code == 200  # no class: as before


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def classes(request, tmp_path):
    yield from class_store(request.param, tmp_path, max_students=8)


def test_the_record_rule_of_classes_in_memory_and_in_redis(classes):
    classes.may_record(None, None)                       # no class open: anyone
    state = classes.open("sid-teacher", [])[0].payload
    classes.may_record(state["code"].lower(), state["token"])   # its teacher (the code in any case)
    for code, token in ((None, None), (state["code"], None), (state["code"], "x" * 32), ("ZZZZZ", state["token"])):
        with pytest.raises(Rejected, match="only its teacher may record") as refused:
            classes.may_record(code, token)
        assert refused.value.field == "token"
