"""The page in headless Debian Chromium, driven by Playwright, against `python -m app` on the simulator (the real
model for tests marked model).

One server per module. Every wait is on state the page exposes (`window.__lanes`, the DOM), never a
sleep. Without /usr/bin/chromium these tests skip, unless BATCH_LANES_REQUIRE_BROWSER=1 (CI), where
they fail. Screenshots go to artifacts/ (git-ignored).
"""
import json
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.kit.browser import ARTIFACTS, pixels, rgb, share
from tests.kit.page import RUN_TIMEOUT_MS, lanes, metric, open_page, wait_finished

pytestmark = pytest.mark.browser

XSS_PROMPT = '<img src=x onerror="window.__pwned=1">'
XSS_ID = "<script>__pwned=2</script>"


def test_mixed_preset_shows_the_classroom_table_cells_and_keyboard_playback(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="mixed"]')
    tab.wait_for_function("() => window.__lanes.ticks >= 1", timeout=RUN_TIMEOUT_MS)  # it streams while it runs
    wait_finished(tab)

    # 1) the metrics table, computed in the page from the records, is the classroom table and the server's numbers
    # (the table follows the playhead: at the end it shows the run's final numbers)
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    assert lanes(tab, "metricsCheck") == "ok"
    assert (metric(tab, "static", "steps"), metric(tab, "continuous", "steps")) == ("15", "9")
    assert (metric(tab, "static", "slot_use"), metric(tab, "continuous", "slot_use")) == ("48%", "81%")
    assert (metric(tab, "static", "tokens_per_step"), metric(tab, "continuous", "tokens_per_step")) == ("1.93", "3.22")
    assert (metric(tab, "static", "mean_ttft_steps"), metric(tab, "continuous", "mean_ttft_steps")) == \
        ("5.0", "2.4 (2.375)")

    # 2) pixels at the cells the page's own layout reports: hatched padding in static, a lettered prefill in continuous
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit && window.__lanes.limit === 15")
    palette = lanes(tab, "palette")
    padding = tab.evaluate("() => window.__lanes.findCell('static', 'padding')")
    assert padding and padding["step"] == 3, padding  # R2 and R4 finished at step 2
    seen = pixels(tab, {k: padding[k] + (2 if k in "xy" else -4) for k in "xywh"})
    assert share(rgb(palette["padding"]), seen) > 0.3 and share(rgb(palette["hatch"]), seen) > 0.05
    prefill = tab.evaluate("() => window.__lanes.findCell('continuous', 'prefill')")
    assert prefill and prefill["step"] == 1, prefill
    seen = pixels(tab, {k: prefill[k] + (2 if k in "xy" else -4) for k in "xywh"})
    assert share(rgb(palette["prefill"]), seen) > 0.5
    assert share(rgb(palette["prefillText"]), seen, tolerance=40) > 0.01  # the "P" mark, not colour alone
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-mixed.png"), full_page=True)

    # 3) the keyboard drives the client's clock
    tab.keyboard.press("Home")
    tab.wait_for_function("() => window.__lanes.playhead === 0")
    for _ in range(3):
        tab.keyboard.press("ArrowRight")
    tab.wait_for_function("() => window.__lanes.playhead === 3")
    assert lanes(tab, "narration").startswith("Step 3")
    tab.keyboard.press("ArrowLeft")
    tab.wait_for_function("() => window.__lanes.playhead === 2")
    tab.keyboard.press("+")
    tab.wait_for_function("() => window.__lanes.speed === 2")
    tab.keyboard.press("Space")
    tab.wait_for_function("() => window.__lanes.playing && window.__lanes.playhead > 2")
    tab.keyboard.press("Space")
    tab.wait_for_function("() => !window.__lanes.playing")
    tab.keyboard.press("?")
    tab.wait_for_selector("#help", state="visible")

    # 4) exports: the metrics as CSV and a Perfetto trace with a track per lane slot
    with tab.expect_download() as download:
        tab.click("#export-csv")
    rows = [line.split(",") for line in Path(download.value.path()).read_text().splitlines()]
    assert [(r[0], r[1]) for r in rows[1:]] == [("static", "15"), ("continuous", "9")]
    with tab.expect_download() as download:
        tab.click("#export-trace")
    events = json.loads(Path(download.value.path()).read_text())["traceEvents"]
    assert len([e for e in events if e["name"] == "thread_name"]) == 8  # 2 lanes x 4 slots
    assert len([e for e in events if e["ph"] == "X"]) == (29 + 31) + 29  # every computed cell: tokens + padding

    assert tab.problems == []
    assert tab.hosts == {"127.0.0.1"}


def test_prompts_ids_and_tokens_render_as_text_never_as_markup(tab, server):
    open_page(tab, server)
    tab.wait_for_selector("[data-field='requests[1].id']", state="attached")
    tab.click("#editor-details summary")
    for button in tab.query_selector_all("table.mix button.remove")[2:]:
        button.click()
    tab.fill("[data-field='requests[0].prompt']", XSS_PROMPT)
    tab.fill("[data-field='requests[0].max_new_tokens']", "2")
    tab.fill("[data-field='requests[1].id']", XSS_ID)
    tab.fill("[data-field='requests[1].max_new_tokens']", "2")
    tab.click("button:has-text('Run this mix')")
    wait_finished(tab)
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")

    def check_literal():
        assert tab.evaluate("() => typeof window.__pwned") == "undefined"
        assert tab.evaluate("() => document.querySelectorAll('img, main script').length") == 0
        rows = tab.locator("#request-rows tr")
        assert rows.nth(0).locator("td.prompt").text_content() == XSS_PROMPT
        assert rows.nth(1).locator("th").text_content() == XSS_ID

    check_literal()
    tab.hover("#lanes", position={"x": 120, "y": 80})  # a tooltip over the canvas is text too
    # the link to the run replays it from the server: the text still shows literally
    assert urlparse(tab.url).path.startswith("/runs/")
    tab.goto(tab.url)
    wait_finished(tab)
    check_literal()
    assert tab.input_value("[data-field='requests[1].id']") == XSS_ID
    assert tab.problems == []


def test_memory_pressure_demo_shows_preemption_and_the_kv_bar_stays_within_its_budget(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="memory-pressure"]')
    wait_finished(tab)
    assert lanes(tab, "metricsCheck") == "ok"
    # two continuous configurations side by side: KV for about three answers preempts, twice that does not
    assert lanes(tab, "order") == ["static", "continuous KV 224", "continuous KV 448"]
    assert lanes(tab, "lanes['continuous KV 224'].metrics.preemptions") >= 1
    assert lanes(tab, "lanes['continuous KV 448'].metrics.preemptions") == 0
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    assert tab.evaluate("() => window.__lanes.findCell('continuous KV 224', 'preempted')") is not None
    palette = lanes(tab, "palette")
    for lane in lanes(tab, "layout.lanes"):
        kv = lanes(tab, f"lanes[{lane['name']!r}].kv")
        assert all(0 <= used <= total for used, total in zip(kv["used"], kv["total"])), kv
        bar = lane["kv"]
        above = pixels(tab, {"x": bar["x"], "y": bar["y"] - 3, "w": bar["w"], "h": 2})
        assert share(rgb(palette["kv"]), above, tolerance=20) == 0  # nothing drawn past the budget line
        inside = pixels(tab, {"x": bar["x"], "y": bar["y"] + 1, "w": bar["w"], "h": bar["h"] - 1})
        assert share(rgb(palette["kv"]), inside, tolerance=20) > 0
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-memory-pressure.png"), full_page=True)
    assert tab.problems == []
