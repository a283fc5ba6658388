"""The class's QR code and the address it carries: a hostile Host header is neither encoded nor cached, a configured
public URL is what QR codes carry, a loopback one is named as one, and the bind address and public URL come from the
command line and the environment."""
import segno

from engine import Engine
from tests.kit.classroom import open_class, submit


# -- the QR code's address ---------------------------------------------------------------------------

def svg_of(url: str) -> bytes:
    import io
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="svg", scale=8, border=2, xmldecl=False, dark="#1d2330")
    return out.getvalue()


def test_a_hostile_host_header_is_not_encoded_in_the_class_qr_code_nor_cached(make_app, connect):
    app = make_app({"HOST": "127.0.0.1", "PORT": 5123}, engine=Engine(None))
    _, state = open_class(connect, app)
    page = app.test_client().get(f"/c/{state['code']}")
    assert page.status_code == 200 and f'data-class-code="{state["code"]}"' in page.get_data(as_text=True)
    qr = app.test_client().get(f"/c/{state['code']}/qr.svg", headers={"Host": "evil.example"})
    assert qr.data != svg_of(f"http://evil.example/c/{state['code']}")
    assert qr.data == svg_of(f"http://127.0.0.1:5123/c/{state['code']}")
    assert "max-age" not in qr.headers["Cache-Control"]
    own = app.test_client().get(f"/c/{state['code']}/qr.svg", headers={"Host": "localhost:5123"})
    assert own.data == svg_of(f"http://localhost:5123/c/{state['code']}")


def test_a_run_qr_code_does_not_carry_a_hostile_host_header(make_app, connect):
    app = make_app({"HOST": "0.0.0.0", "PORT": 5124, "PUBLIC_URL": None}, engine=Engine(None))
    probe = connect(app)
    run_id = submit(probe)["run_id"]
    probe.wait_for("run_finished", run_id)
    qr = app.test_client().get(f"/runs/{run_id}/qr.svg", headers={"Host": "evil.example:5124"})
    assert qr.status_code == 200 and qr.data != svg_of(f"http://evil.example:5124/runs/{run_id}")
    from app.web.public_url import _machine_address
    assert qr.data == svg_of(f"http://{_machine_address()}:5124/runs/{run_id}")   # bound to every interface
    assert qr.headers["Cache-Control"] == "no-cache"


def test_a_configured_public_url_is_what_qr_codes_carry_and_a_loopback_one_is_named(make_app):
    app = make_app({"PUBLIC_URL": "http://192.168.1.20:5000"}, engine=Engine(None))
    share = app.test_client().get("/api/share", headers={"Host": "evil.example"}).get_json()
    assert share == {"base": "http://192.168.1.20:5000/", "loopback": False, "warning": None}
    local = make_app(engine=Engine(None)).test_client().get("/api/share").get_json()
    assert local["loopback"] and "a phone cannot reach it" in local["warning"] and "--host 0.0.0.0" in local["warning"]


def test_the_public_url_and_bind_address_come_from_the_command_line_and_the_environment(make_app, monkeypatch):
    from app import cli, engine_worker
    parser = cli.build_parser()
    config = cli.config_from_args(parser.parse_args(["--host", "0.0.0.0", "--port", "5055", "--public-url",
                                                     "http://10.0.0.5:5055"]), parser)
    assert (config["HOST"], config["PORT"], config["PUBLIC_URL"]) == ("0.0.0.0", 5055, "http://10.0.0.5:5055")
    worker = engine_worker.build_parser()                     # the engine worker has no address of its own
    assert "PUBLIC_URL" not in cli.config_from_args(worker.parse_args(["--message-queue", "redis://x"]), worker)
    monkeypatch.setenv("BATCH_LANES_PUBLIC_URL", "http://lab.example:8000")
    app = make_app(engine=Engine(None))
    assert app.test_client().get("/api/share").get_json()["base"] == "http://lab.example:8000/"
