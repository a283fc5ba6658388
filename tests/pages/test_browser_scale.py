"""The page in headless Chromium over a scale-out deployment (a real redis-server, an engine worker, two web
processes) behind a failover proxy: when the web process serving the page is killed mid-run, the page's socket
reconnects through the proxy to the other one, rejoins its run with `watch` and plays it to the end with every
tick — no reload, no error. The simulator paces its steps (4x their simulated time) so the run lasts seconds."""
import pytest

from tests.kit.browser import ARTIFACTS, watched_context, watched_page
from tests.kit.proxy import failover_proxy
from tests.kit.scale import deployment

pytestmark = [pytest.mark.browser, pytest.mark.redis]

RUN_TIMEOUT_MS = 120_000


def test_the_page_rejoins_its_run_on_another_web_process_when_its_own_is_killed(tmp_path, browser):
    with deployment(tmp_path, workers=1, worker_args=("--backend", "sim", "--pace", "4")) as d, \
            failover_proxy([("127.0.0.1", int(url.rsplit(":", 1)[1])) for url, _ in d.webs]) as url:
        context = watched_context(browser, viewport={"width": 1280, "height": 900})
        page = watched_page(context)
        page.goto(f"{url}/#preset=mixed")                     # the preset link runs it
        page.wait_for_function("() => window.__lanes.status === 'running' && window.__lanes.ticks >= 3",
                               timeout=RUN_TIMEOUT_MS)
        run_id = page.evaluate("() => window.__lanes.runId")
        d.webs[0][1].kill()                                  # kill -9 the web process the page is on
        page.wait_for_function("() => !window.__lanes.connected", timeout=30_000)
        page.wait_for_function("() => window.__lanes.connected", timeout=60_000)  # the socket retried: web B
        page.wait_for_function("() => window.__lanes.status === 'finished'", timeout=RUN_TIMEOUT_MS)
        seen = page.evaluate("() => ({runId: window.__lanes.runId, ticks: window.__lanes.ticks, error: window.__lanes.error,"
                             " steps: Object.values(window.__lanes.lanes).map((l) => l.steps)})")
        assert seen["runId"] == run_id and seen["ticks"] == 15 and seen["error"] is None
        assert seen["steps"] == [15, 9]                       # static and continuous, whole
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "scale-rejoined.png"))
        # the refused connection attempts while web A was gone are the only console errors
        assert all("socket.io" in p or "ERR_CONNECTION" in p or "Failed to load resource" in p
                   for p in page.problems), page.problems
        context.close()                                       # before the deployment stops: no socket left retrying
