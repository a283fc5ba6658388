"""Nothing lost: finished runs go to SQLite in the data folder, a stored run replays after a real server
restart (`/runs/<id>`, `/api/runs/<id>`, `watch`), and storage failures are reported, never dropped."""
import json
import logging
import shutil

import pytest
import requests

from app.runs.store import RunStore, StoreError
from engine import Engine
from tests.kit.server import EventClient, live_server
from tests.kit import ROOT

TINY = {"name": "tiny", "slots": 2, "requests": [{"id": "A", "prompt": "Say hi.", "max_new_tokens": 2},
                                                 {"id": "B", "prompt": "Name a fruit.", "max_new_tokens": 3}]}
MIXED = json.loads((ROOT / "demos" / "mixed.json").read_text())


def test_the_store_round_trips_a_run_and_knows_what_it_lacks(tmp_path):
    store = RunStore(tmp_path / "data" / "runs.sqlite3")
    records = {"static": [{"lane": "static", "step": 1, "slots": []}]}
    store.save("abc", "m", {"name": "w"}, ["static"], records, {"static": {"steps": 1}})
    run = store.load("abc")
    assert (run["workload"], run["lanes"], run["records"], run["metrics"]) == (
        {"name": "w"}, ["static"], records, {"static": {"steps": 1}})
    assert store.load("other") is None and store.count() == 1
    assert store.has("abc") and not store.has("other")
    with pytest.raises(StoreError, match="could not save run abc"):
        store.save("abc", "m", {}, [], {}, {})            # ids are unique: a second save is an error, not a no-op


def test_an_unusable_data_folder_is_a_store_error_naming_the_path(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    store = RunStore(tmp_path / "file" / "runs.sqlite3")
    with pytest.raises(StoreError, match="file/runs.sqlite3"):
        store.save("x", "m", {}, [], {}, {})
    with pytest.raises(StoreError):
        store.load("x")


@pytest.mark.model
def test_a_run_that_cannot_be_saved_is_reported_to_its_room_and_logged(make_app, connect, smol, tmp_path, caplog):
    app = make_app({"DATA_DIR": tmp_path / "data"}, engine=Engine(smol))
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    (tmp_path / "data").write_text("the disk is gone")  # the data folder is now a file: SQLite cannot open
    probe = connect(app)
    with caplog.at_level(logging.ERROR, logger="batch_lanes"):
        probe.emit("submit", {"workload": TINY})
        run_id = probe.wait_for("run_queued")["run_id"]
        finished = probe.wait_for("run_finished", run_id)
        error = probe.wait_for("run_error", run_id)
    assert finished["stored"] is False and finished["metrics"]["static"]["tokens"] == 5
    assert error["code"] == "storage" and error["field"] == "storage" and "could not be saved" in error["message"]
    assert any(f"could not save run {run_id}" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    # until it is pushed out of memory the run still replays, over the socket and over HTTP
    other = connect(app)
    other.emit("watch", {"run_id": run_id})
    assert other.wait_for("run_finished", run_id)["metrics"] == finished["metrics"]
    assert app.test_client().get(f"/api/runs/{run_id}").get_json()["metrics"] == finished["metrics"]
    response = app.test_client().get("/api/runs/someotherrun")
    assert response.status_code == 503 and "cannot be read" in response.get_json()["error"]


@pytest.mark.slow
def test_a_shared_link_replays_a_stored_run_after_a_server_restart(tmp_path):
    data = tmp_path / "data"
    with live_server("--backend", "sim", data_dir=data) as url:
        client = EventClient(url)
        client.emit("submit", {"workload": MIXED})
        run_id = client.wait_for("run_queued")["run_id"]
        finished = client.wait_for("run_finished")
        client.close()
        before = requests.get(f"{url}/api/runs/{run_id}").json()
    assert (data / "runs.sqlite3").is_file()

    with live_server("--backend", "sim", data_dir=data) as url:  # a new process: memory is gone, the file is not
        after = requests.get(f"{url}/api/runs/{run_id}")
        assert after.status_code == 200 and after.json() == before
        assert after.json()["metrics"] == finished["metrics"]
        page = requests.get(f"{url}/runs/{run_id}")
        assert page.status_code == 200 and run_id in page.text
        assert requests.get(f"{url}/runs/nosuchrun").status_code == 404
        client = EventClient(url)
        client.emit("watch", {"run_id": run_id})
        assert client.wait_for("run_finished")["metrics"] == finished["metrics"]
        ticks = client.named("tick")
        assert [t["t"] for t in ticks] == list(range(1, 16))
        client.close()
