"""The compare page (/compare/<a>/<b>) in headless Debian Chromium, driven by Playwright, against `python -m app` with
the real model: two real runs (the mixed demo with 4 slots and with 8) drawn on one clock, run A's lanes above run
B's, the metrics table equal to the server's stored numbers, End at the longer run's end on both clocks, nothing cut
off at 1280x720; an unknown or unfinished run said plainly; the form that picks two runs.

One server per module. Every wait is on state the page exposes (`window.__compare`, the DOM), never a sleep. Without
/usr/bin/chromium these tests skip, unless BATCH_LANES_REQUIRE_BROWSER=1 (CI), where they fail. The screenshot
goes to artifacts/ (git-ignored).
"""
import json
import math
from urllib.parse import urlparse

import pytest
import requests

from tests.kit.browser import ARTIFACTS, ROOT, watched_context
from tests.kit.server import EventClient, live_server

pytestmark = pytest.mark.browser

W, H = 1280, 720
MIXED = json.loads((ROOT / "demos" / "mixed.json").read_text())
PREFILL = (0xE6, 0x9F, 0x00)  # renderer.js PALETTE.prefill
WHITE = (0xFF, 0xFF, 0xFF)
CONTROLS = ("#btn-start", "#btn-back", "#btn-play", "#btn-fwd", "#btn-end", "#scrub", "#readout",
            "label:has(input[name='clock'][value='steps'])", "label:has(input[name='clock'][value='ms'])",
            "#run-a", "#run-b", "#compare", "#swap")


def run_to_end(url: str, workload: dict) -> str:
    """Submit `workload` through the socket, wait for it to finish; its run id."""
    client = EventClient(url)
    try:
        client.emit("submit", {"workload": workload})
        run_id = client.wait_for("run_queued")["run_id"]
        finished = client.wait_for("run_finished", run_id, timeout=300)
        assert finished["stored"], finished
        return run_id
    finally:
        client.close()


@pytest.fixture(scope="module")
def server(browser, tmp_path_factory):
    with live_server("--backend", "sim", "--pace", "1", data_dir=tmp_path_factory.mktemp("data")) as url:
        yield url


@pytest.fixture(scope="module")
def runs(server):
    """Two real stored runs, as /api/runs serves them: A the mixed demo on 4 slots, B the same mix on 8."""
    ids = [run_to_end(server, MIXED), run_to_end(server, {**MIXED, "slots": 8})]
    return [requests.get(f"{server}/api/runs/{run_id}").json() for run_id in ids]


@pytest.fixture
def context(browser, server):
    """A 1280x720 context recording console errors (with the address they name), uncaught exceptions, CSP
    violations and the host of every request."""
    ctx = watched_context(browser, console_location=True, viewport={"width": W, "height": H})
    yield ctx
    ctx.close()


@pytest.fixture
def tab(context):
    return context.new_page()


def cmp(page, expression: str):
    return page.evaluate(f"() => window.__compare.{expression}")


def open_compare(page, url: str, status: str = "ready"):
    response = page.goto(url)
    page.wait_for_function("() => window.__compare && window.__compare.status !== 'loading'")
    assert cmp(page, "status") == status, cmp(page, "message")
    return response


def no_problems(page, context, allowed: tuple[str, ...] = ()) -> None:
    assert page.evaluate("() => window.__csp") == []
    assert [p for p in context.problems if not any(a in p for a in allowed)] == []
    assert context.hosts == {"127.0.0.1"}


def pixel(page, x: float, y: float) -> tuple:
    """The canvas's colour at CSS pixel (x, y)."""
    return tuple(page.evaluate("""([x, y]) => {
        const c = document.getElementById('lanes'), dpr = window.__compare.layout.dpr;
        return [...c.getContext('2d').getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data.slice(0, 3)];
    }""", [x, y]))


def inside(rect, width, height) -> bool:
    """Whether a layout rectangle lies within width x height (a lane title's has no width: it spans the canvas)."""
    return rect["x"] >= 0 and rect["y"] >= 0 and rect["x"] + rect.get("w", 0) <= width + 1e-6 and \
        rect["y"] + rect["h"] <= height + 1e-6


def close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def ends(run) -> tuple[int, float]:
    """A stored run's last step and its lane clock's latest end (ms), over its lanes."""
    records = run["records"].values()
    return max(map(len, records)), max(r[-1]["start_ms"] + r[-1]["ms"] for r in records if r)


def press(page, key: str, playhead: float) -> None:
    page.keyboard.press(key)
    page.wait_for_function("(t) => Math.abs(window.__compare.playhead - t) < 1e-6 && !window.__compare.playing", arg=playhead)


def test_two_runs_are_drawn_on_one_clock_a_above_b_with_the_servers_numbers(context, tab, server, runs):
    a, b = runs
    response = open_compare(tab, f"{server}/compare/{a['run_id']}/{b['run_id']}")
    assert response.status == 200
    assert [r["id"] for r in cmp(tab, "runs")] == [a["run_id"], b["run_id"]]

    # 1) every lane of both runs, A's above B's, titled with its run; arrivals in steps: the steps clock
    order = ["A · static", "A · continuous", "B · static", "B · continuous"]
    assert cmp(tab, "order") == order and cmp(tab, "clock") == "steps"
    assert [cmp(tab, f"lanes[{name!r}].title").split(" · ")[0] for name in order] == ["A", "A", "B", "B"]
    layout = cmp(tab, "layout")
    assert layout["canvas"]["width"] == layout["width"] and layout["canvas"]["height"] == layout["height"]
    assert layout["canvas"]["left"] >= 0 and layout["canvas"]["left"] + layout["width"] <= W
    lanes = layout["lanes"]
    assert [lane["rows"] for lane in lanes] == [4, 4, 8, 8]
    for lane in lanes:
        for part in ("title", "grid", "kv"):
            assert inside(lane[part], layout["width"], layout["height"]), (lane["name"], part)
    for upper, lower in zip(lanes, lanes[1:]):  # stacked, none overlapping
        assert upper["kv"]["y"] + upper["kv"]["h"] <= lower["title"]["y"], (upper["name"], lower["name"])
    assert len({(lane["grid"]["x"], lane["grid"]["w"]) for lane in lanes}) == 1  # one x-axis

    # 2) each run's heading sits in its own band above its lanes: name, size, model, a link to replay it
    groups = {g["side"]: g for g in layout["groups"]}
    assert groups["A"]["lanes"] == order[:2] and groups["B"]["lanes"] == order[2:]
    assert lanes[1]["kv"]["y"] + lanes[1]["kv"]["h"] <= groups["B"]["band"]["y"]
    for side, run, first in (("A", a, lanes[0]), ("B", b, lanes[2])):
        band = groups[side]["band"]
        assert band["y"] + band["h"] <= first["title"]["y"]
        head = tab.locator(f".run-head[data-side='{side}']")
        text = head.text_content()
        assert "mixed" in text and run["model"] in text and f"{run['workload']['slots']} slots" in text
        assert head.locator("a.open").get_attribute("href") == f"/runs/{run['run_id']}"
        box = head.bounding_box()
        top = layout["canvas"]["top"] + band["y"]
        assert top - 0.5 <= box["y"] and box["y"] + box["height"] <= top + band["h"] + 0.5
        assert box["x"] >= 0 and box["x"] + box["width"] <= W

    # 3) End: the playhead at the longer run's end; there B's static lane (8 steps) has stopped, A's (15) not
    (a_steps, a_ms), (b_steps, b_ms) = ends(a), ends(b)
    assert (a_steps, b_steps) == (15, 8)
    press(tab, "End", a_steps)
    assert cmp(tab, "limit") == cmp(tab, "domain.steps") == a_steps
    last = cmp(tab, "cellRect('A · static', 15, 0)")
    grid = lanes[0]["grid"]
    assert math.isclose(last["x"] + last["w"], grid["x"] + grid["w"])  # the longer run spans the axis
    for name, row in (("A · static", 0), ("B · static", 7)):
        first = cmp(tab, f"cellRect({name!r}, 1, {row})")
        assert pixel(tab, first["x"] + 3, first["y"] + 3) == PREFILL, name
    after = cmp(tab, "cellRect('B · static', 9, 0)")  # on one clock B's static lane has ended by step 9
    assert pixel(tab, after["x"] + after["w"] / 2, after["y"] + after["h"] / 2) == WHITE
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "compare-1280x720.png"))
    cell = cmp(tab, "cellRect('A · continuous', 3, 1)")  # hover: the request's tooltip, the lane named with its run
    tab.mouse.move(layout["canvas"]["left"] + cell["x"] + cell["w"] / 2, layout["canvas"]["top"] + cell["y"] + 4)
    tab.wait_for_selector("#tooltip:not([hidden])")
    assert "A · continuous lane" in tab.text_content("#tooltip")
    tab.mouse.move(0, 0)

    # 4) nothing cut off at 1280x720: the controls in the viewport without scrolling, no sideways scroll
    assert tab.evaluate("() => scrollY") == 0
    for selector in CONTROLS:
        box = tab.locator(selector).bounding_box()
        assert box and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= W \
            and box["y"] + box["height"] <= H, (selector, box)
    assert tab.evaluate("() => document.documentElement.scrollWidth") <= W
    assert tab.evaluate("() => { const s = document.querySelector('.table-scroll'); "
                        "return s.scrollWidth <= s.clientWidth; }")

    # 5) the metrics table: a row per (run, lane) equal to the server's numbers, and B − A for shared lanes
    columns = cmp(tab, "columns")
    for lane in ("static", "continuous"):
        for side, run in (("A", a), ("B", b)):
            row = tab.locator(f"#metrics-table tr[data-side='{side}'][data-lane='{lane}']")
            assert row.locator("th").text_content() == f"{side} · {lane}"
            for key in columns:
                cell = row.locator(f"td[data-metric='{key}']").get_attribute("data-value")
                assert close(float(cell) if cell else None, run["metrics"][lane][key]), (side, lane, key)
        diff = tab.locator(f"#metrics-table tr.diff[data-lane='{lane}']")
        for key in columns:
            want = b["metrics"][lane][key] - a["metrics"][lane][key]
            assert close(float(diff.locator(f"td[data-metric='{key}']").get_attribute("data-value")), want), (lane, key)
    fewer = tab.locator("#metrics-table tr.diff[data-lane='static'] td[data-metric='steps']")
    assert fewer.locator(".abs").text_content() == "\u22127" and fewer.get_attribute("class") == "better"
    assert tab.get_attribute("#metrics-check", "data-check") == "match"
    assert [r["check"] for r in cmp(tab, "runs")] == ["ok", "ok"]

    # 6) the clock switch: on milliseconds, End is the later of the two runs' lane-clock ends
    tab.click("label:has(input[name='clock'][value='ms'])")
    tab.wait_for_function("() => window.__compare.clock === 'ms'")
    press(tab, "End", max(a_ms, b_ms))
    assert math.isclose(cmp(tab, "limit"), max(a_ms, b_ms)) and math.isclose(cmp(tab, "domain.ms"), max(a_ms, b_ms))
    assert cmp(tab, "layout.lanes[0].grid.w") == grid["w"]

    # 7) Home, a step, play and pause: every lane follows the one playhead
    tab.click("label:has(input[name='clock'][value='steps'])")
    tab.wait_for_function("() => window.__compare.clock === 'steps'")
    press(tab, "Home", 0)
    tab.click("#btn-fwd")
    tab.wait_for_function("() => window.__compare.playhead === 1")
    assert {v["stepAtPlayhead"] for v in cmp(tab, "lanes").values()} == {1}
    tab.click("#btn-play")
    tab.wait_for_function("() => window.__compare.playing && window.__compare.playhead > 1")
    tab.keyboard.press("Space")
    tab.wait_for_function("() => !window.__compare.playing")
    no_problems(tab, context)


def test_an_unknown_run_is_a_404_page_that_names_it(context, tab, server, runs):
    known = runs[1]["run_id"]
    response = open_compare(tab, f"{server}/compare/nosuchrun/{known}", status="missing")
    assert response.status == 404
    message = tab.locator("#missing")
    assert message.is_visible() and "Run A (nosuchrun) does not exist" in message.text_content()
    assert known not in message.text_content()
    assert message.locator("a[href='/']").count() == 1
    assert tab.locator("#stage").is_hidden() and tab.locator("#metrics-panel").is_hidden()
    assert tab.input_value("#run-b") == known  # ready to fix the one that is wrong
    # Chromium reports the 404 page itself as a failed load; nothing else may go wrong
    no_problems(tab, context, allowed=(f"status of 404 (NOT FOUND) @ {server}/compare/nosuchrun/{known}",))


def test_the_form_takes_ids_or_run_links_and_opens_that_comparison(context, tab, server, runs):
    a, b = (r["run_id"] for r in runs)
    open_compare(tab, f"{server}/compare/{a}/{b}")
    tab.fill("#run-a", "not a run!")
    tab.fill("#run-b", "")
    tab.click("#compare")
    tab.wait_for_function("() => document.querySelector('[data-error-for=\"a\"]').textContent !== ''")
    assert tab.get_attribute("#run-a", "aria-invalid") == "true" and tab.get_attribute("#run-b", "aria-invalid") == "true"
    assert urlparse(tab.url).path == f"/compare/{a}/{b}"  # nothing opened
    tab.fill("#run-a", f"{server}/runs/{b}")  # a pasted link, and a bare id
    tab.fill("#run-b", f" {a} ")
    with tab.expect_navigation():
        tab.click("#compare")
    tab.wait_for_function("() => window.__compare && window.__compare.status === 'ready'")
    assert urlparse(tab.url).path == f"/compare/{b}/{a}"
    assert [r["id"] for r in cmp(tab, "runs")] == [b, a]
    assert cmp(tab, "layout.lanes[0].rows") == 8  # the 8-slot run is A now
    with tab.expect_navigation():
        tab.click("#swap")
    tab.wait_for_function("() => window.__compare && window.__compare.status === 'ready'")
    assert urlparse(tab.url).path == f"/compare/{a}/{b}"
    no_problems(tab, context)


def test_a_run_that_has_not_finished_is_said_so(context, tab, server, runs):
    long = {"name": "long", "slots": 2, "requests": [
        {"id": f"L{i}", "prompt": "Tell a long story.", "max_new_tokens": 96, "ignore_eos": True} for i in range(2)]}
    client = EventClient(server)
    try:
        client.emit("submit", {"workload": long})
        running = client.wait_for("run_queued")["run_id"]
        open_compare(tab, f"{server}/compare/{running}/{runs[0]['run_id']}", status="error")
        status = tab.text_content("#compare-status")
        assert f"Run A ({running}) cannot be shown" in status and "finished" in status
        assert tab.get_attribute("#compare-status", "data-tone") == "error"
        assert tab.locator("#canvas-wrap").is_hidden()
        client.wait_for("run_finished", running, timeout=300)
    finally:
        client.close()
    no_problems(tab, context, allowed=(f"status of 404 (NOT FOUND) @ {server}/api/runs/{running}",))
