"""The load-sweep page (/sweep) in headless Debian Chromium, driven by Playwright, against `python -m app` with the
real model: a small generated sweep runs to its end and draws what it computed, a point opens its run on the main
page, a running sweep is cancelled with its button, and a bad field is named next to its input.

One server per module. Every wait is on state the page exposes (`window.__sweep`, `window.__lanes`, the DOM), never
a sleep, and nothing asserts a duration. Without /usr/bin/chromium these tests skip, unless
BATCH_LANES_REQUIRE_BROWSER=1 (CI), where they fail. The screenshot goes to artifacts/ (git-ignored).
"""
from urllib.parse import urlparse

import pytest

from tests.kit.browser import ARTIFACTS, ROOT, watched_context
from tests.kit.server import live_server

pytestmark = pytest.mark.browser

SWEEP_TIMEOUT_MS = 540_000  # a sweep on the real model on a busy 2-core machine
LANES = ["static", "continuous"]


@pytest.fixture(scope="module")
def server(browser, tmp_path_factory):
    for name in ("socket.io.min.js", "uPlot.iife.min.js", "uPlot.min.css"):
        assert (ROOT / "static" / "vendor" / name).is_file(), f"static/vendor/{name} is missing: run `make setup`"
    with live_server("--backend", "sim", "--pace", "1", data_dir=tmp_path_factory.mktemp("data")) as url:
        yield url


@pytest.fixture
def context(browser, server):
    """A browser context at 1280x720 whose every page (new tabs too) records console errors, uncaught exceptions,
    CSP violations and the host of every request, in `context.problems` and `context.hosts`."""
    ctx = watched_context(browser, viewport={"width": 1280, "height": 720})
    yield ctx
    ctx.close()


@pytest.fixture
def tab(context):
    return context.new_page()


def sweep(page, expression: str):
    return page.evaluate(f"() => window.__sweep.{expression}")


def open_sweep(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function("() => window.__sweep && window.__sweep.connected && window.__sweep.canSubmit")
    page.wait_for_selector("#source option[value='preset:poisson']", state="attached")


def start_sweep(page, rates: str, n: int) -> str:
    """Run the generated poisson preset at `rates` with `n` requests per rate on both lanes; the sweep's id."""
    page.select_option("#source", "preset:poisson")
    page.fill("#rates", rates)
    page.fill("#n", str(n))
    assert page.locator("#lane-checks input:checked").count() == len(LANES)
    page.click("#run-sweep")
    page.wait_for_function("() => window.__sweep.sweepId && window.__sweep.own")
    return sweep(page, "sweepId")


def no_problems(page, context) -> None:
    assert page.evaluate("() => window.__csp") == []
    assert context.problems == []
    assert context.hosts == {"127.0.0.1"}


def chart_pixels(page, chart: str, colour: str) -> int:
    """How many pixels of a chart's uPlot canvas are within a few levels of `colour` (#rrggbb)."""
    return page.evaluate("""([id, hex]) => {
        const canvas = document.querySelector(`#${id} canvas`);
        const want = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
        const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (want.every((c, k) => Math.abs(c - d[i + k]) <= 8)) n++;
        return n;
    }""", [chart, colour])


def open_point(context, page, click) -> "object":
    """Do `click` on the sweep page and return the tab it opens, once its replayed run has finished."""
    with context.expect_page() as opened:
        click()
    run_tab = opened.value
    run_tab.wait_for_function("() => window.__lanes && (window.__lanes.status === 'finished' "
                              "|| window.__lanes.status === 'error')", timeout=60_000)
    assert run_tab.evaluate("() => window.__lanes.status") == "finished", run_tab.evaluate("() => window.__lanes.error")
    return run_tab


def test_a_small_sweep_draws_a_line_per_lane_a_row_per_point_and_each_point_opens_its_run(context, tab, server):
    open_sweep(tab, f"{server}/sweep")
    sweep_id = start_sweep(tab, "1, 8", 3)
    assert urlparse(tab.url).path == f"/sweep/{sweep_id}"  # a reload rejoins it
    tab.wait_for_function("() => ['finished', 'error', 'cancelled'].includes(window.__sweep.status)",
                          timeout=SWEEP_TIMEOUT_MS)
    assert sweep(tab, "status") == "finished", sweep(tab, "error")

    # 1) the progress bar reached its end
    progress = sweep(tab, "progress")
    assert progress["fraction"] == 1 and progress["bar"] == 1 and progress["done"] == progress["total"] == 2
    assert tab.text_content("#progress-text").startswith("100%")
    assert tab.locator("#cancel-sweep").is_disabled() and tab.locator("#run-sweep").is_enabled()

    # 2) two uPlot charts, a line per lane at every rate, named in the legend, drawn in the lanes' colours
    points = sweep(tab, "points")
    assert [p["rate"] for p in points] == [1, 8] and all(p["point_run_id"] for p in points)
    for name, key in (("ttft", "p95_ttft_ms"), ("goodput", "request_goodput")):
        chart = sweep(tab, f"charts.{name}")
        assert chart["drawn"] and chart["rates"] == [1, 8]
        assert [s["name"] for s in chart["series"]] == LANES
        assert all(lane in chart["legend"] for lane in LANES)
        for s in chart["series"]:
            assert s["values"] == [p["lanes"][s["name"]][key] for p in points]
            assert all(v is not None and v >= 0 for v in s["values"])
            assert chart_pixels(tab, f"chart-{name}", s["stroke"]) > 30
    assert sweep(tab, "charts.ttft.slo") == 2000 and sweep(tab, "slo.ttft_ms") == 2000

    # 3) the table: a row per rate and lane, holding exactly what the charts draw
    rows = tab.locator("#points-table tbody tr[data-lane]")
    assert rows.count() == 2 * len(LANES)
    assert [(r.get_attribute("data-rate"), r.get_attribute("data-lane")) for r in rows.all()] == \
        [(rate, lane) for rate in ("1", "8") for lane in LANES]
    for point in points:
        for lane in LANES:
            row = tab.locator(f"#points-table tr[data-rate='{point['rate']:g}'][data-lane='{lane}']")
            m = point["lanes"][lane]
            assert row.locator("td[data-metric='completed']").text_content() == "3" == str(m["completed"])
            assert float(row.locator("td[data-metric='p95_ttft_ms']").get_attribute("data-value")) == m["p95_ttft_ms"]
            assert float(row.locator("td[data-metric='request_goodput']").get_attribute("data-value")) == \
                m["request_goodput"]
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "sweep-view.png"))

    # 4) a row's link opens that rate's run on the main page, finished, with the same lanes and requests
    run_tab = open_point(context, tab, lambda: tab.click("#points-table tr[data-rate='1'] a.point-link >> nth=0"))
    assert urlparse(run_tab.url).path == f"/runs/{points[0]['point_run_id']}"
    assert run_tab.evaluate("() => Object.keys(window.__lanes.lanes)") == LANES
    for lane in LANES:
        assert run_tab.evaluate(f"() => Object.keys(window.__lanes.lanes[{lane!r}].metrics.requests).length") == 3
    run_tab.close()

    # 5) and so does a click on a chart's point (here continuous at 8 req/s)
    tab.locator("#chart-ttft").scroll_into_view_if_needed()
    where = tab.evaluate("() => window.__sweep.pointAt('ttft', 'continuous', 8)")
    assert where is not None
    scroll = tab.evaluate("() => ({x: scrollX, y: scrollY})")
    run_tab = open_point(context, tab, lambda: tab.mouse.click(where["x"] - scroll["x"], where["y"] - scroll["y"]))
    assert urlparse(run_tab.url).path == f"/runs/{points[1]['point_run_id']}"
    run_tab.close()

    # 6) a reload of /sweep/<id> rejoins the finished sweep and shows the same points and what it ran
    tab.reload()
    tab.wait_for_function("() => window.__sweep && window.__sweep.status === 'finished'")
    assert sweep(tab, "points") == points and sweep(tab, "rows") == 4
    assert tab.input_value("#rates") == "1, 8" and tab.input_value("#n") == "3"
    no_problems(tab, context)


def test_the_cancel_button_stops_a_running_sweep(context, tab, server):
    open_sweep(tab, f"{server}/sweep")
    assert tab.locator("#cancel-sweep").is_disabled()  # nothing of ours runs yet
    start_sweep(tab, "0.5, 1, 2, 4", 12)
    tab.wait_for_function("() => window.__sweep.status === 'running' && window.__sweep.canCancel",
                          timeout=SWEEP_TIMEOUT_MS)
    tab.click("#cancel-sweep")
    tab.wait_for_function("() => window.__sweep.status === 'cancelled'", timeout=SWEEP_TIMEOUT_MS)
    assert sweep(tab, "error.code") == "cancelled"
    assert "Cancelled" in tab.text_content("#sweep-status")
    assert tab.get_attribute("#sweep-progress", "data-status") == "cancelled"
    assert tab.locator("#cancel-sweep").is_disabled()
    tab.wait_for_function("() => window.__sweep.canSubmit")  # the engine takes this page's next sweep
    assert sweep(tab, "errors") == []
    no_problems(tab, context)


def test_a_bad_field_is_named_next_to_its_input(context, tab, server):
    open_sweep(tab, f"{server}/sweep")
    tab.select_option("#source", "preset:poisson")
    tab.fill("#rates", "1, fast")  # the page itself refuses this one
    tab.click("#run-sweep")
    tab.wait_for_function("() => window.__sweep.errors.some((e) => e.field === 'rates')")
    assert "rates" in tab.text_content("[data-error-for='rates']")
    assert tab.get_attribute("#rates", "aria-invalid") == "true"
    tab.fill("#rates", "1")
    tab.fill("#n", "99")  # above the server's max_requests: the server names generate.n
    tab.click("#run-sweep")
    tab.wait_for_function("() => window.__sweep.errors.some((e) => e.field === 'generate.n')")
    assert "generate.n" in tab.text_content("[data-error-for='generate.n']")
    assert tab.get_attribute("#n", "aria-invalid") == "true"
    assert tab.text_content("[data-error-for='rates']") == "" and sweep(tab, "status") == "idle"
    no_problems(tab, context)
