"""Shared fixtures: the real default model (loaded once per session), a tiny random-weight Llama, a browser, apps
and socket clients; and the tiers' guard. What the tests share beyond fixtures lives in tests/kit/.

The tiers (pyproject.toml's markers): `model` (the real SmolLM2), `browser` (Chromium), `redis` (redis-server),
`slow` (server subprocesses on the simulator). `make check` runs every test with none of them. A test that uses the
`smol` or `browser` fixture without its mark is a collection error, and loading the default model in-process
without the `model` mark fails the test, so a slow test cannot slip into the fast tier unseen."""
from engine.threads import configure

configure()  # as every entry point does, before torch loads: a bare `pytest` gets the Makefile's OMP_WAIT_POLICY too
from contextlib import ExitStack  # noqa: E402

import pytest  # noqa: E402

from engine.worker.model import LoadedModel, ModelLoadError, load_model  # noqa: E402
from tests.kit.probe import SocketProbe  # noqa: E402
from tests.kit.tiny import tiny_model, tiny_model_folder  # noqa: E402

TIER_OF_FIXTURE = {"smol": "model", "browser": "browser"}


def pytest_collection_modifyitems(config, items):
    unmarked = [f"{item.nodeid} uses the {fixture!r} fixture: mark it @pytest.mark.{mark}"
                for item in items for fixture, mark in TIER_OF_FIXTURE.items()
                if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(mark) is None]
    if unmarked:
        raise pytest.UsageError("tests outside their tier (tests/conftest.py):\n  " + "\n  ".join(unmarked))


@pytest.fixture(autouse=True)
def _real_model_only_in_its_tier(request, monkeypatch):
    """Outside the model tier, loading the default model in this process (an app with no engine given, say) is an
    error that names the mark, not a silent ~15 s load. Processes the test starts are not watched."""
    if request.node.get_closest_marker("model") is None:
        def unmarked(*args, **kwargs):
            raise ModelLoadError(f"{request.node.nodeid} loads the default model: mark it @pytest.mark.model")
        monkeypatch.setattr("engine.worker.model.default_model_path", unmarked)


@pytest.fixture(scope="session")
def smol() -> LoadedModel:
    """The real default model, SmolLM2-135M-Instruct, float32 on CPU."""
    return load_model(dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def tiny() -> LoadedModel:
    """A 2-layer random-weight Llama with a byte-level BPE tokenizer of its own (tests/kit/tiny.py): no real model."""
    return tiny_model()


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory) -> LoadedModel:
    """The tiny model saved as a Hugging Face folder: each process of a split lane (a TP rank, a PP stage) loads its
    part from it."""
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium through Playwright, one per session (tests/kit/browser.py: a skip, or under
    BATCH_LANES_REQUIRE_BROWSER=1 a failure, when it is missing)."""
    from tests.kit.browser import chromium
    with chromium() as b:
        yield b


# --- the main page (`/`) in Chromium: one live server per session, a fresh watched context and tab per test ---
# (test modules with a page of their own, /live, /sweep, /compare, define their own `server` and `context`)

PAGE_CONTEXT = {"viewport": {"width": 1360, "height": 1000}, "device_scale_factor": 2}


def page_server(tmp_path_factory, *backend: str):
    """`python -m app *backend` (tests/kit/server.py) with its own data folder, once the page's vendored JS is there."""
    from tests.kit.browser import ROOT
    from tests.kit.server import live_server

    vendor = ROOT / "static" / "vendor" / "socket.io.min.js"
    assert vendor.is_file(), "the Socket.IO client is missing: run `make static/vendor/socket.io.min.js`"
    return live_server(*backend, data_dir=tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory):
    """`shared_server(*args) -> url`: one `page_server(*args)` for the whole session per distinct `args`, started
    when first asked, stopped when the session ends. The modules whose tests only add requests or runs of their
    own share it (a real-model server costs ~10 s to start; an idle one costs no CPU); a module that needs a
    server nobody else touched (a fresh live lane, a restart, limits of its own) starts its own with `live_server`."""
    with ExitStack() as started:
        servers: dict[tuple[str, ...], str] = {}

        def get(*args: str) -> str:
            if args not in servers:
                servers[args] = started.enter_context(page_server(tmp_path_factory, *args))
            return servers[args]
        yield get


@pytest.fixture(scope="session")
def model_server(shared_server):
    return shared_server()


@pytest.fixture(scope="session")
def sim_server(shared_server):
    return shared_server("--backend", "sim")


@pytest.fixture
def server(request):
    """The base URL of this module's page server: on the real model for a test marked `model`, else on the
    simulator (`--backend sim`: the same schedulers and step records, no tokens, no text), which is all a test
    of layout, colours or page mechanics needs. Each is started once per session, when a test first asks."""
    return request.getfixturevalue("model_server" if request.node.get_closest_marker("model") else "sim_server")


@pytest.fixture
def context(request, browser, server):
    """A browser context that records console errors, uncaught exceptions and the host of every request
    (tests/kit/browser.py's `watched_context`): PAGE_CONTEXT, or the module's own BROWSER_CONTEXT (the projector)."""
    from tests.kit.browser import watched_context

    ctx = watched_context(browser, **getattr(request.module, "BROWSER_CONTEXT", PAGE_CONTEXT))
    yield ctx
    ctx.close()


@pytest.fixture
def tab(context):
    """A fresh page of `context`, carrying its `problems` and `hosts`."""
    from tests.kit.browser import watched_page

    return watched_page(context)


# --- the server (app/): apps whose engine worker is stopped after each test, and socket test clients ---

@pytest.fixture
def make_app(tmp_path):
    """`make_app(config=None, engine=None)`: `create_app` with its data under tmp_path; workers stopped afterwards."""
    from app.web.factory import create_app

    apps = []

    def make(config: dict | None = None, engine=None):
        app = create_app({"DATA_DIR": tmp_path / "data", **(config or {})}, engine=engine)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["worker"].stop()


@pytest.fixture
def connect():
    """`connect(app) -> SocketProbe`: a socket test client on `app`; all are disconnected afterwards."""
    from app.web.extensions import socketio

    probes = []

    def make(app, **kwargs) -> SocketProbe:
        probe = SocketProbe(socketio.test_client(app, **kwargs))
        probes.append(probe)
        return probe

    yield make
    for probe in probes:
        probe.disconnect()
