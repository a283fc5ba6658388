"""HTTP routes and the "no way in" settings: health, presets, limits, run pages, JSON errors, the
Content-Security-Policy, same-origin Socket.IO, SECRET_KEY, no debug, a patched python-engineio."""
import importlib.metadata

import pytest

from engine import Engine

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


@pytest.fixture
def app(make_app, smol):
    return make_app(engine=Engine(smol))


@pytest.mark.model
def test_healthz_says_ready_with_the_model_and_device(app, smol):
    response = app.test_client().get("/healthz")
    assert response.status_code == 200
    body = response.get_json()
    assert body.pop("storage")["ok"] is True   # the run store's check (tests/app/test_app_storage_health.py)
    assert body == {"status": "ok", "ready": True, "model": smol.name, "device": "cpu", "progress": 1.0, "queued": 0}


@pytest.mark.model
def test_presets_are_the_demos_mixed_same_one_long_first(app):
    presets = app.test_client().get("/api/presets").get_json()["presets"]
    assert [p["name"] for p in presets][:3] == ["mixed", "same", "one-long"]
    assert all(p["description"] and p["requests"] for p in presets)


def test_presets_come_in_the_class_plans_order_then_by_name():
    from app.settings import ROOT
    from app.web.routes import preset_rank

    names = sorted((p.stem for p in (ROOT / "demos").glob("*.json")), key=preset_rank)
    assert names[:8] == ["mixed", "same", "one-long", "arrivals", "long-prompt", "memory-pressure", "priorities", "slots"]
    assert names[8:] == sorted(names[8:]) and len(names) > 8


@pytest.mark.model
def test_the_page_and_every_response_carry_the_content_security_policy(app):
    http = app.test_client()
    page = http.get("/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    for response in (page, http.get("/healthz"), http.get("/api/limits"), http.get("/nope")):
        assert response.headers["Content-Security-Policy"] == CSP
        assert response.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.model
def test_unknown_runs_are_a_page_saying_so_and_the_api_keeps_json_404s(app):
    http = app.test_client()
    for path in ("/api/runs/nosuchrun", "/api/runs/" + "x" * 65, "/nope", "/runs/nosuchrun/qr.svg"):
        response = http.get(path)
        assert response.status_code == 404 and response.is_json and "error" in response.get_json(), path
    for path, shown in (("/runs/nosuchrun", "nosuchrun"), ("/runs/bad%20id!", "bad id!"),
                        ("/compare/nosuchrun/other", "nosuchrun")):
        page = http.get(path)
        assert page.status_code == 404 and page.mimetype == "text/html", path
        assert 'data-missing' in page.get_data(as_text=True) and shown in page.get_data(as_text=True), path
    assert http.post("/api/presets").status_code == 405


@pytest.mark.model
def test_a_finished_run_has_a_qr_code_of_its_link(make_app, smol, connect):
    import segno
    app = make_app({"PUBLIC_URL": "http://class.example:5000"}, engine=Engine(smol))  # a Host header is not trusted
    probe = connect(app)
    probe.emit("submit", {"workload": {"requests": [{"id": "A", "prompt": "Hi.", "max_new_tokens": 1}]}})
    run_id = probe.wait_for("run_queued")["run_id"]
    probe.wait_for("run_finished", run_id)
    response = app.test_client().get(f"/runs/{run_id}/qr.svg", base_url="http://class.example:5000")
    assert response.status_code == 200 and response.mimetype == "image/svg+xml"
    # the symbol encodes the server's public address: the same matrix segno makes for that link
    expected = segno.make(f"http://class.example:5000/runs/{run_id}", error="m")
    import io
    out = io.BytesIO()
    expected.save(out, kind="svg", scale=8, border=2, xmldecl=False, dark="#1d2330")
    assert response.get_data() == out.getvalue()


@pytest.mark.model
def test_prompt_token_counts_use_the_servers_tokenizer(app, smol):
    http = app.test_client()
    prompts = ["What is the capital of France?", "x" * 300, ""]
    body = http.post("/api/tokens", json={"prompts": prompts}).get_json()
    assert body["tokens"] == [len(smol.encode_prompt(p)) for p in prompts]
    for bad in ({"prompts": "hi"}, {"prompts": [1]}, {"prompts": ["x"] * 33}, [], {"prompts": ["x" * 4001]}):
        response = http.post("/api/tokens", json=bad)
        assert response.status_code == 400 and response.get_json()["field"] == "prompts", bad


@pytest.mark.model
def test_a_run_page_exists_for_a_live_run(app, connect):
    probe = connect(app)
    probe.emit("submit", {"workload": {"requests": [{"id": "A", "prompt": "Hi.", "max_new_tokens": 1}]}})
    run_id = probe.wait_for("run_queued")["run_id"]
    page = app.test_client().get(f"/runs/{run_id}")
    assert page.status_code == 200 and page.mimetype == "text/html"
    probe.wait_for("run_finished", run_id)
    assert app.test_client().get(f"/runs/{run_id}").status_code == 200


def test_secret_key_comes_from_the_environment_or_is_random(make_app, monkeypatch):
    monkeypatch.delenv("BATCH_LANES_SECRET_KEY", raising=False)
    first, second = make_app(engine=Engine(None)), make_app(engine=Engine(None))
    assert len(first.config["SECRET_KEY"]) == 64 and first.config["SECRET_KEY"] != second.config["SECRET_KEY"]
    monkeypatch.setenv("BATCH_LANES_SECRET_KEY", "from-the-environment")
    assert make_app(engine=Engine(None)).config["SECRET_KEY"] == "from-the-environment"


@pytest.mark.model
def test_no_debug_same_origin_sockets_and_a_patched_engineio(app):
    from app.web.extensions import socketio
    assert app.debug is False and app.config["DEBUG"] is False
    assert socketio.server.eio.cors_allowed_origins is None      # engine.io's same-origin check, never "*"
    version = tuple(int(x) for x in importlib.metadata.version("python-engineio").split(".")[:3])
    assert version >= (4, 13, 2)


def test_limits_change_from_the_command_line_by_their_api_names():
    from app.cli import build_parser, config_from_args

    parser = build_parser()
    config = config_from_args(parser.parse_args(["--limit", "max_requests=4", "--limit", "max_queued_runs=3",
                                                 "--limit", "max_message_bytes=65536"]), parser)
    assert config["LIMITS"].max_requests == 4 and config["LIMITS"].max_slots == 16
    assert config["MAX_QUEUED_RUNS"] == 3 and config["MAX_MESSAGE_BYTES"] == 65536
    for bad in ("max_requests=many", "turbo=3", "max_requests"):
        with pytest.raises(SystemExit):
            config_from_args(parser.parse_args(["--limit", bad]), parser)
