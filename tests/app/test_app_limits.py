"""Issue 4's limits: every violation is a run_error naming the field and the limit, and nothing reaches the
engine; the limits are the app's LIMITS config (engine.workload.workload.Limits), and /api/limits shows them."""
import copy

import pytest

from engine import Engine
from engine.workload.workload import Limits

pytestmark = pytest.mark.model

LIMITS = Limits(max_requests=4, max_slots=4, max_lanes=2, max_new_tokens=16, max_prompt_chars=200,
                max_prompt_tokens=60, max_arrival=20, max_id_chars=8, max_name_chars=20, max_wait=10,
                max_kv_budget=4096)
BASE = {"name": "tiny", "slots": 2,
        "requests": [{"id": "A", "prompt": "Say hi.", "max_new_tokens": 2, "arrival": 0},
                     {"id": "B", "prompt": "Name a fruit.", "max_new_tokens": 3, "arrival": 1}]}


@pytest.fixture
def app(make_app, smol):
    return make_app({"LIMITS": LIMITS}, engine=Engine(smol))


def with_change(path: str, value):
    """BASE with the value at a dotted path ("requests.0.prompt") replaced; `...` deletes it."""
    workload = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = workload
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is ...:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return workload


REQUEST = {"id": "X", "prompt": "Hi.", "max_new_tokens": 1}

# (what is wrong, the submit payload, the field run_error must name, words its message must hold)
CASES = [
    ("too many requests", {"workload": with_change("requests", [dict(REQUEST, id=str(i)) for i in range(5)])},
     "requests", ["1 to 4", "got 5"]),
    ("no requests", {"workload": with_change("requests", [])}, "requests", ["1 to 4"]),
    ("requests not a list", {"workload": with_change("requests", {"A": 1})}, "requests", ["list"]),
    ("too many slots", {"workload": with_change("slots", 5)}, "slots", ["1 to 4", "got 5"]),
    ("zero slots", {"workload": with_change("slots", 0)}, "slots", ["1 to 4"]),
    ("slots a string", {"workload": with_change("slots", "2")}, "slots", ["integer", "str"]),
    ("slots a boolean", {"workload": with_change("slots", True)}, "slots", ["integer", "bool"]),
    ("too many lanes", {"workload": BASE, "lanes": ["static", "dynamic", "continuous"]}, "lanes", ["1 to 2"]),
    ("no lanes", {"workload": BASE, "lanes": []}, "lanes", ["1 to 2"]),
    ("unknown lane", {"workload": BASE, "lanes": ["static", "turbo"]}, "lanes[1]", ["static, dynamic, continuous"]),
    ("duplicate lane", {"workload": BASE, "lanes": ["static", "static"]}, "lanes[1]", ["distinct"]),
    ("duplicate lane name", {"workload": BASE, "lanes": ["static", {"name": "static", "policy": "dynamic"}]},
     "lanes[1].name", ["distinct"]),
    ("lane without policy", {"workload": BASE, "lanes": [{"name": "x"}]}, "lanes[0].policy", ["static, dynamic"]),
    ("lane option of another policy", {"workload": BASE, "lanes": [{"policy": "static", "chunk_size": 8}]},
     "lanes[0].chunk_size", ["continuous lanes", "static lane"]),
    ("lane unknown option", {"workload": BASE, "lanes": [{"policy": "continuous", "turbo": 1}]},
     "lanes[0].turbo", ["unknown key"]),
    ("lane slots over", {"workload": BASE, "lanes": [{"name": "big", "policy": "continuous", "slots": 5}]},
     "lanes[0].slots", ["1 to 4", "got 5"]),
    ("lane name too long", {"workload": BASE, "lanes": [{"name": "x" * 9, "policy": "continuous"}]},
     "lanes[0].name", ["limit is 8"]),
    ("lane not an object", {"workload": BASE, "lanes": [3]}, "lanes[0]", ["name or an object"]),
    ("arrival and arrival_ms", {"workload": with_change("requests.0.arrival_ms", 10)}, "requests[0].arrival",
     ["arrival_ms", "not both"]),
    ("arrival_ms negative", {"workload": with_change("requests", [dict(REQUEST, arrival_ms=-1)])},
     "requests[0].arrival_ms", ["from 0"]),
    ("max_wait with ms arrivals", {"workload": dict(with_change("requests", [dict(REQUEST, arrival_ms=5)]),
                                                    max_wait=3)}, "max_wait", ["max_wait_ms"]),
    ("generate and requests", {"workload": dict(BASE, generate={"n": 2})}, "generate", ["not both"]),
    ("generate rate zero", {"workload": {"name": "g", "generate": {"n": 2, "rate": 0}}}, "generate.rate", ["from"]),
    ("generate too many", {"workload": {"name": "g", "generate": {"n": 5}}}, "generate.n", ["1 to 4"]),
    ("lanes not a list", {"workload": BASE, "lanes": "static"}, "lanes", ["list"]),
    ("max_new_tokens over", {"workload": with_change("requests.0.max_new_tokens", 17)},
     "requests[0].max_new_tokens", ["1 to 16", "got 17"]),
    ("max_new_tokens zero", {"workload": with_change("requests.0.max_new_tokens", 0)},
     "requests[0].max_new_tokens", ["1 to 16"]),
    ("max_new_tokens a float", {"workload": with_change("requests.1.max_new_tokens", 2.5)},
     "requests[1].max_new_tokens", ["integer", "float"]),
    ("max_new_tokens huge", {"workload": with_change("requests.1.max_new_tokens", 10 ** 30)},
     "requests[1].max_new_tokens", ["1 to 16"]),
    ("prompt characters", {"workload": with_change("requests.1.prompt", "x" * 201)},
     "requests[1].prompt", ["201 characters", "limit is 200"]),
    ("prompt tokens", {"workload": with_change("requests.0.prompt", "word " * 39)},
     "requests[0].prompt", ["tokens", "limit is 60"]),
    ("empty prompt", {"workload": with_change("requests.0.prompt", "   ")}, "requests[0].prompt", ["empty"]),
    ("prompt missing", {"workload": with_change("requests.0.prompt", ...)}, "requests[0].prompt", ["required"]),
    ("prompt not a string", {"workload": with_change("requests.0.prompt", ["Say", "hi"])},
     "requests[0].prompt", ["string", "list"]),
    ("NUL in a prompt", {"workload": with_change("requests.0.prompt", "a\x00b")}, "requests[0].prompt", ["NUL"]),
    ("arrival over", {"workload": with_change("requests.1.arrival", 21)}, "requests[1].arrival", ["0 to 20", "got 21"]),
    ("arrival negative", {"workload": with_change("requests.1.arrival", -1)}, "requests[1].arrival", ["0 to 20"]),
    ("duplicate ids", {"workload": with_change("requests.1.id", "A")}, "requests[1].id", ["duplicate", "'A'"]),
    ("id too long", {"workload": with_change("requests.1.id", "R" * 9)}, "requests[1].id", ["limit is 8"]),
    ("id not a string", {"workload": with_change("requests.1.id", 7)}, "requests[1].id", ["string", "int"]),
    ("empty id", {"workload": with_change("requests.1.id", "")}, "requests[1].id", ["empty"]),
    ("name too long", {"workload": with_change("name", "n" * 21)}, "name", ["limit is 20"]),
    ("ignore_eos not a boolean", {"workload": with_change("requests.0.ignore_eos", "yes")},
     "requests[0].ignore_eos", ["true or false"]),
    ("max_wait over", {"workload": with_change("max_wait", 11)}, "max_wait", ["0 to 10"]),
    ("kv_budget over", {"workload": with_change("kv_budget", 4097)}, "kv_budget", ["1 to 4096"]),
    ("kv budget a request can never fit", {"workload": with_change("kv_budget", 16)},
     "requests[0].max_new_tokens", ["can never fit the KV budget of 16 tokens"]),
    ("unknown policy", {"workload": with_change("policy", "lifo")}, "policy", ["fcfs, priority"]),
    ("unknown workload key", {"workload": with_change("turbo", True)}, "turbo", ["unknown key"]),
    ("unknown request key", {"workload": with_change("requests.0.colour", "blue")},
     "requests[0].colour", ["unknown key"]),
    ("unknown submit key", {"workload": BASE, "model": "gpt"}, "model", ["unknown key", "lanes, workload"]),
    ("workload missing", {"lanes": ["static"]}, "workload", ["required"]),
    ("workload not an object", {"workload": [BASE]}, "workload", ["object", "list"]),
    ("request not an object", {"workload": with_change("requests.0", "Say hi.")}, "requests[0]", ["object", "str"]),
]


@pytest.mark.parametrize("payload,field,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_violation_is_a_run_error_naming_field_and_limit_and_reaches_no_engine(app, connect, payload, field,
                                                                                   words):
    probe = connect(app)
    probe.emit("submit", payload)
    error = probe.wait_for("run_error")
    assert error["field"] == field, error
    assert all(word in error["message"] for word in words), error["message"]
    assert error["run_id"] is None and error["code"] == "invalid"
    assert probe.named("run_queued") == [] and app.extensions["book"].runs == {}


def test_the_valid_base_workload_runs_so_the_cases_above_fail_for_their_one_change(app, connect):
    probe = connect(app)
    probe.emit("submit", {"workload": BASE, "lanes": ["static", "continuous"]})
    run_id = probe.wait_for("run_queued")["run_id"]
    assert probe.wait_for("run_finished", run_id)["metrics"]["static"]["tokens"] == 5


def test_prompt_plus_new_tokens_must_fit_the_models_context(make_app, connect, smol):
    app = make_app({"LIMITS": Limits(max_new_tokens=100_000)}, engine=Engine(smol))
    probe = connect(app)
    probe.emit("submit", {"workload": with_change("requests.0.max_new_tokens", smol.max_context)})
    error = probe.wait_for("run_error")
    assert error["field"] == "requests[0].max_new_tokens"
    assert f"exceeds the model's context of {smol.max_context}" in error["message"]


def test_a_50000_character_prompt_is_refused_by_the_default_limits(make_app, connect, smol):
    app = make_app(engine=Engine(smol))
    probe = connect(app)
    probe.emit("submit", {"workload": with_change("requests.0.prompt", "ab" * 25_000)})
    error = probe.wait_for("run_error")
    assert error["field"] == "requests[0].prompt" and "50000 characters, the limit is 4000" in error["message"]


def test_a_long_unknown_key_is_echoed_shortened(app, connect):
    probe = connect(app)
    probe.emit("submit", {"workload": with_change("k" * 5000, 1)})
    error = probe.wait_for("run_error")
    assert error["field"].startswith("kkk") and len(error["field"]) <= 200 and len(error["message"]) <= 500


def test_api_limits_reports_the_configured_limits(app):
    body = app.test_client().get("/api/limits").get_json()
    assert body["max_requests"] == 4 and body["max_prompt_chars"] == 200 and body["max_lanes"] == 2
    assert body["max_message_bytes"] == 256 * 1024 and body["lanes"] == ["static", "dynamic", "continuous"]
    assert body["max_queued_runs"] == 32 and body["submits_per_minute"] == 10


def test_socket_messages_are_capped_well_below_one_megabyte(app):
    assert app.config["MAX_MESSAGE_BYTES"] <= 256 * 1024
    from app.web.extensions import socketio
    assert socketio.server.eio.max_http_buffer_size == app.config["MAX_MESSAGE_BYTES"]
