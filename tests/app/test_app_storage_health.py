"""Storage said at start (issue 22): a `--data` where runs cannot be saved (not a folder, read-only, full) is in
the log at start, in /healthz (`storage`, status `degraded`) and on the page, before any run ends `stored: false`."""
import logging

from app.runs import store as store_module
from engine import Engine


def test_a_data_folder_that_cannot_be_written_is_said_at_start_on_healthz_and_on_the_page(make_app, tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    with caplog.at_level(logging.ERROR):
        app = make_app({"DATA_DIR": blocker / "data"}, engine=Engine(None))
    assert any("storage: runs cannot be saved" in r.getMessage() for r in caplog.records)
    health = app.test_client().get("/healthz").get_json()
    assert health["status"] == "degraded" and health["storage"]["ok"] is False
    assert "NotADirectoryError" in health["storage"]["error"] or "FileExistsError" in health["storage"]["error"]
    page = app.test_client().get("/").get_data(as_text=True)
    assert 'id="storage-warning"' in page and "Runs are not being saved" in page


def test_too_little_free_space_is_reported_with_the_figure(make_app, monkeypatch):
    monkeypatch.setattr(store_module, "MIN_FREE_MB", 10 ** 12)
    health = make_app(engine=Engine(None)).test_client().get("/healthz").get_json()
    assert health["status"] == "degraded" and "MB free under" in health["storage"]["error"]
    assert isinstance(health["storage"]["free_mb"], int)


def test_a_writable_store_is_ok_and_the_page_says_nothing(make_app):
    app = make_app(engine=Engine(None))
    health = app.test_client().get("/healthz").get_json()
    assert health["status"] == "ok" and health["storage"] == {**health["storage"], "ok": True, "error": None}
    assert 'id="storage-warning"' not in app.test_client().get("/").get_data(as_text=True)
