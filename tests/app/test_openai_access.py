"""Who may call the serving API (issue 39, item 2), with Flask's test client on the simulator: `--api-key` guards
/v1, /tokenize and /detokenize with a 401 in OpenAI's error object and leaves the page's routes open;
`--allowed-origins` answers a browser's CORS preflight and marks the answers, for those origins only; the command
line takes the key from $VLLM_API_KEY too; `--served-model-name` (item 8): the names /v1 lists, with a real `created`."""
from engine import Engine

from app.cli import build_parser, config_from_args

KEY = "sk-test-123"


def sim_app(make_app, **config):
    return make_app({"LIVE_SLOTS": 2, **config}, engine=Engine(None))


def test_an_api_key_guards_v1_and_tokenize_with_openais_401_and_leaves_the_page_open(make_app):
    c = sim_app(make_app, API_KEY=KEY).test_client()
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        r = c.post("/v1/chat/completions", json=body, headers=headers)
        assert r.status_code == 401 and r.json["error"]["code"] == "invalid_api_key", r.json
        assert r.json["error"]["type"] == "invalid_request_error" and r.headers["WWW-Authenticate"] == "Bearer"
    assert c.get("/v1/models").status_code == 401 and c.post("/tokenize", json={"prompt": "hi"}).status_code == 401
    ok = {"Authorization": f"Bearer {KEY}"}
    assert c.post("/v1/chat/completions", json=body, headers=ok).status_code == 200
    assert c.get("/v1/models", headers=ok).status_code == 200
    for path in ("/", "/live", "/api/live", "/metrics", "/health", "/healthz", "/api/limits"):
        assert c.get(path).status_code == 200, path


def test_allowed_origins_answer_the_preflight_and_mark_answers_for_those_origins_only(make_app):
    c = sim_app(make_app, API_KEY=KEY, ALLOWED_ORIGINS=("https://a.example",)).test_client()
    pre = c.options("/v1/chat/completions", headers={"Origin": "https://a.example",
                                                     "Access-Control-Request-Method": "POST",
                                                     "Access-Control-Request-Headers": "authorization, content-type"})
    assert pre.status_code == 204 and pre.headers["Access-Control-Allow-Origin"] == "https://a.example"
    assert "POST" in pre.headers["Access-Control-Allow-Methods"]
    assert pre.headers["Access-Control-Allow-Headers"] == "authorization, content-type"
    r = c.get("/v1/models", headers={"Origin": "https://a.example", "Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == "https://a.example"
    other = c.get("/v1/models", headers={"Origin": "https://b.example", "Authorization": f"Bearer {KEY}"})
    assert "Access-Control-Allow-Origin" not in other.headers
    page = c.get("/api/live", headers={"Origin": "https://a.example"})
    assert "Access-Control-Allow-Origin" not in page.headers          # the page's routes stay same-origin
    closed = sim_app(make_app).test_client().options(
        "/v1/models", headers={"Origin": "https://a.example", "Access-Control-Request-Method": "GET"})
    assert "Access-Control-Allow-Origin" not in closed.headers


def test_the_command_line_takes_the_key_from_vllms_variable_and_origins_as_json(monkeypatch):
    parser = build_parser()
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    config = config_from_args(parser.parse_args(["--backend", "sim", "--allowed-origins", '["https://a.example/"]']),
                              parser)
    assert config["API_KEY"] == "from-env" and config["ALLOWED_ORIGINS"] == ("https://a.example",)
    config = config_from_args(parser.parse_args(["--backend", "sim", "--api-key", "flag"]), parser)
    assert config["API_KEY"] == "flag" and config["ALLOWED_ORIGINS"] == ()


def test_served_model_names_are_listed_with_a_real_created_and_answered_to(make_app):
    import time

    c = sim_app(make_app, SERVED_MODEL_NAMES=("HuggingFaceTB/SmolLM2-135M-Instruct", "smol")).test_client()
    cards = c.get("/v1/models").json["data"]
    assert [m["id"] for m in cards] == ["HuggingFaceTB/SmolLM2-135M-Instruct", "smol"]
    assert all(abs(m["created"] - time.time()) < 600 and m["root"] == "simulator" for m in cards)
    r = c.post("/v1/completions", json={"model": "smol", "prompt": "hi", "max_tokens": 2})
    assert r.status_code == 200 and r.json["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert c.get("/v1/models/smol").json["id"] == "smol" and c.get("/v1/models/other").status_code == 404
    assert c.post("/v1/completions", json={"model": "other", "prompt": "hi"}).status_code == 404
