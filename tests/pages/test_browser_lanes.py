"""Lanes as configurations on the lane clocks, in headless Chromium against `python -m app` on the simulator (the
real model for tests marked model).

Four lane configurations built in the editor share one clock; ms arrivals draw waits and arrival marks; an
arrival process fills the request rows; lesson placeholders are filled from the run. Every wait is on state
the page exposes (`window.__lanes`, the DOM), never a sleep; no assertion depends on how fast the CPU is.
"""
import json
import math
import re
from pathlib import Path
from urllib.request import urlopen

import pytest

from tests.kit.browser import ARTIFACTS, pixels, rgb, share
from tests.kit.page import RUN_TIMEOUT_MS, lanes, open_page, wait_finished

pytestmark = pytest.mark.browser

FOUR = ["static", "dynamic", "continuous", "chunked 32"]


def use_ms_clock(page) -> None:
    """Switch to the milliseconds clock and jump to the end, waiting until the playhead is drawn there."""
    page.click("label:has(input[name=clock][value=ms])")
    page.wait_for_function("() => window.__lanes.clock === 'ms'")
    page.keyboard.press("End")
    page.wait_for_function("() => window.__lanes.shown === window.__lanes.limit && window.__lanes.limit > 0")


def seek(page, t: float) -> None:
    """Move the playhead with the scrubber, as a drag would."""
    page.evaluate("""(t) => { const s = document.getElementById('scrub'); s.value = String(t);
                              s.dispatchEvent(new Event('input', {bubbles: true})); }""", t)
    page.wait_for_function("(t) => Math.abs(window.__lanes.shown - t) < 1e-6", arg=t)


def last_end(lane: dict) -> float:
    return lane["ends"][-1] if lane["ends"] else 0.0


def test_four_lane_configurations_from_the_editor_run_on_one_clock(tab, server):
    open_page(tab, server)
    tab.wait_for_selector("[data-field='lanes[1].name']", state="attached")
    tab.click("#editor-details summary")
    # 1) build the lanes with the editor: two more rows, the second a named continuous configuration
    tab.click("#add-lane")
    assert tab.input_value("[data-field='lanes[2].policy']") == "dynamic"
    tab.click("#add-lane")
    assert tab.is_disabled("#add-lane")  # max_lanes (4) reached
    assert tab.input_value("[data-field='lanes[3].policy']") == "continuous"
    assert tab.is_hidden("[data-field='lanes[3].max_wait']") and tab.is_visible("[data-field='lanes[2].max_wait']")
    tab.fill("[data-field='lanes[3].name']", "chunked 32")
    tab.fill("[data-field='lanes[3].chunk_size']", "32")
    assert tab.evaluate("() => location.hash").startswith("#mix=")  # the mix, lanes and all, is in the link

    # 2) a KV budget below one block: the editor refuses it next to that lane's field, with the server's rule
    tab.fill("[data-field='lanes[1].kv_budget']", "8")  # below one KV block (16 tokens)
    tab.click("#run-mix")
    tab.wait_for_function("() => document.querySelector(\"[data-error-for='lanes[1].kv_budget']\").textContent !== ''")
    assert "kv_block_size" in tab.text_content("[data-error-for='lanes[1].kv_budget']")
    assert lanes(tab, "status") == "idle"  # refused before it was sent
    assert tab.get_attribute("[data-field='lanes[1].kv_budget']", "aria-invalid") == "true"
    tab.fill("[data-field='lanes[1].kv_budget']", "")

    tab.click("#run-mix")
    tab.wait_for_function("() => window.__lanes.ticks >= 1", timeout=RUN_TIMEOUT_MS)
    wait_finished(tab)
    assert lanes(tab, "metricsCheck") == "ok"
    tab.keyboard.press("End")  # the table follows the playhead: the run's final numbers at the end
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    assert lanes(tab, "order") == FOUR
    assert [l["name"] for l in lanes(tab, "layout.lanes")] == FOUR
    assert lanes(tab, "lanes['chunked 32'].title") == "chunked 32 \u2014 continuous, chunk 32"
    assert lanes(tab, "lanes['chunked 32'].policy") == "continuous"
    rows = tab.eval_on_selector_all("#metrics-table tbody tr", "rows => rows.map(r => r.dataset.lane)")
    assert rows == FOUR
    assert tab.text_content('#metrics-table td[data-lane="static"][data-metric="steps"]') == "15"
    assert tab.text_content('#metrics-table td[data-lane="continuous"][data-metric="steps"]') == "9"
    grids = [l["grid"] for l in lanes(tab, "layout.lanes")]
    assert all(a["y"] + a["h"] < b["y"] for a, b in zip(grids, grids[1:]))  # stacked, never overlapping
    assert grids[-1]["y"] + grids[-1]["h"] < lanes(tab, "layout.height")

    # 3) the milliseconds clock ends where the longest lane's clock ends
    use_ms_clock(tab)
    ends = [last_end(lanes(tab, f"lanes[{name!r}]")) for name in FOUR]
    assert lanes(tab, "limit") == pytest.approx(max(ends), abs=1e-6)
    assert lanes(tab, "shown") == pytest.approx(max(ends), abs=1e-6)
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-four-lanes.png"), full_page=True)

    # 4) exports keyed by lane name: the CSV has one row per lane, and its columns are every metric the server sends
    with tab.expect_download() as download:
        tab.click("#export-csv")
    csv = [line.split(",") for line in Path(download.value.path()).read_text().splitlines()]
    assert [r[0] for r in csv[1:]] == FOUR
    stored = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())
    numbers = {k for k, v in stored["metrics"]["static"].items() if k not in ("requests", "simulated")}
    assert set(csv[0][1:]) == numbers
    with tab.expect_download() as download:
        tab.click("#export-trace")
    events = json.loads(Path(download.value.path()).read_text())["traceEvents"]
    assert [e["args"]["name"] for e in events if e["name"] == "process_name"] == [f"{n} lane" for n in FOUR]
    assert tab.problems == []


def test_arrivals_preset_on_the_ms_clock_draws_waits_and_arrival_marks(tab, server):
    open_page(tab, server)
    assert lanes(tab, "clock") == "steps"
    tab.click('button[data-preset="arrivals"]')
    wait_finished(tab)
    assert lanes(tab, "clock") == "ms"  # a run with arrivals in ms opens on the milliseconds clock
    assert tab.is_checked("input[name=clock][value=ms]")
    assert lanes(tab, "metricsCheck") == "ok"
    workload_arrivals = {a["id"]: a["arrival_ms"] for a in lanes(tab, "lanes.static.arrivals")}
    assert len(workload_arrivals) == 8
    for name in lanes(tab, "order"):  # no lane finishes before its last request arrives
        assert last_end(lanes(tab, f"lanes[{name!r}]")) >= max(workload_arrivals.values())

    use_ms_clock(tab)
    palette = lanes(tab, "palette")
    # 1) static waits for a full group: its widest gap is drawn with the waiting pattern
    gap = tab.evaluate("() => window.__lanes.findGap('static')")
    assert gap and gap["to"] - gap["from"] > 0, gap
    inset = {"x": gap["x"] + 3, "y": gap["y"] + 3, "w": gap["w"] - 6, "h": gap["h"] - 6}
    seen = pixels(tab, inset)
    assert share(rgb(palette["waiting"]), seen) > 0.3
    assert share(rgb(palette["waitingMark"]), seen, tolerance=30) > 0.03
    # the steps on either side of the gap are where the lane clock says: the gap is not drawn as work
    before = tab.evaluate(f"() => window.__lanes.cellRect('static', {gap['step'] - 1}, 0)") if gap["step"] > 1 else None
    after = tab.evaluate(f"() => window.__lanes.cellRect('static', {gap['step']}, 0)")
    assert after["x"] == pytest.approx(gap["x"] + gap["w"], abs=0.01)
    if before:
        assert before["x"] + before["w"] == pytest.approx(gap["x"], abs=0.01)

    # 2) every request's arrival is marked above each lane's grid, at its ms
    for name in lanes(tab, "order"):
        marks = tab.evaluate(f"() => window.__lanes.marks({name!r})")
        assert sorted(m["id"] for m in marks) == sorted(workload_arrivals), name
    mark = next(m for m in tab.evaluate("() => window.__lanes.marks('continuous')") if m["arrival_ms"] > 0)
    seen = pixels(tab, {"x": mark["x"] - 2, "y": mark["y"] + 1, "w": 4, "h": mark["h"] - 3})
    assert share(rgb(palette["arrival"]), seen, tolerance=30) > 0.3
    tab.hover("#lanes", position={"x": mark["x"], "y": mark["y"] + 3})
    tab.wait_for_selector("#tooltip", state="visible")
    assert f"{mark['id']} arrives at {mark['arrival_ms'] / 1000:.2f} s" in tab.text_content("#tooltip")

    # 3) with the playhead inside the gap, the narration says the lane waits for arrivals
    seek(tab, (gap["from"] + gap["to"]) / 2)
    assert "static: idle, waits for arrivals until" in lanes(tab, "narration")
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-arrivals-ms.png"), full_page=True)

    # 4) the preset's SLO (TTFT <= 500 ms, TPOT <= 150 ms): met counts and goodput beside throughput, a red ring where a
    # request missed, each request's TTFT deadline on its row in the request view; the teacher's targets recount them
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    assert lanes(tab, "slo") == {"ttft_ms": 500, "tpot_ms": 150}
    met = lambda lane: tab.text_content(f'#metrics-table td[data-lane="{lane}"][data-metric="slo_met"]')  # noqa: E731
    assert [met(lane) for lane in ("static", "dynamic", "continuous")] == ["2 / 25%", "4 / 50%", "8 / 100%"]
    goodput = float(tab.text_content('#metrics-table td[data-lane="static"][data-metric="request_goodput"]'))
    assert goodput == pytest.approx(lanes(tab, "lanes.static.metrics.request_goodput"), abs=0.005)
    assert goodput < float(tab.text_content('#metrics-table td[data-lane="static"][data-metric="requests_per_s"]'))
    misses = tab.evaluate("() => window.__lanes.sloMarks('static').misses")
    assert len({m["id"] for m in misses}) == 6 and {m["miss"] for m in misses} == {"ttft"}
    ring = misses[0]
    seen = pixels(tab, {"x": ring["x"] + 1.5, "y": ring["y"] + ring["h"] / 2 - 2, "w": 2, "h": 4})
    assert share(rgb(palette["slo"]), seen, tolerance=30) > 0.5
    assert "missed the SLO" in [item["label"] for item in lanes(tab, "legend")]
    tab.hover("#lanes", position={"x": ring["x"] + ring["w"] / 2, "y": ring["y"] + ring["h"] / 2})
    tab.wait_for_function("(id) => document.getElementById('tooltip').textContent.includes('SLO missed: TTFT')",
                          arg=ring["id"])
    tab.mouse.move(0, 0)
    tab.click("label:has(input[name=view][value=requests])")
    tab.wait_for_function("() => window.__lanes.view === 'requests' && window.__lanes.sloMarks('continuous').deadlines.length === 8")
    due = next(d for d in tab.evaluate("() => window.__lanes.sloMarks('continuous').deadlines") if d["id"] == "R1")
    assert due["x"] == pytest.approx(tab.evaluate("() => window.__lanes.layout.axis.x") + 500 *
                                     tab.evaluate("() => window.__lanes.layout.axis.w / window.__lanes.layout.domain"), abs=0.5)
    assert share(rgb(palette["slo"]), pixels(tab, {"x": due["x"] - 0.5, "y": due["y"] + 2, "w": 1, "h": due["h"] - 4}),
                 tolerance=30) > 0.5
    tab.screenshot(path=str(ARTIFACTS / "browser-arrivals-slo-missed.png"), full_page=True)
    tab.fill("#slo-targets input[name=ttft_ms]", "0")
    tab.click("#slo-targets button[type=submit]")
    assert tab.get_attribute("#slo-targets input[name=ttft_ms]", "aria-invalid") == "true"
    assert "more than 0" in tab.text_content("#slo-targets .field-error")
    tab.fill("#slo-targets input[name=ttft_ms]", "2000")
    tab.click("#slo-targets button[type=submit]")
    tab.wait_for_function("() => window.__lanes.slo && window.__lanes.slo.ttft_ms === 2000")
    assert met("static") == "8 / 100%" and tab.evaluate("() => window.__lanes.sloMarks('static').misses") == []
    assert lanes(tab, "metricsCheck") == "ok"  # the server's numbers are the run's own SLO's, and still agree
    tab.screenshot(path=str(ARTIFACTS / "browser-arrivals-slo.png"), full_page=True)
    tab.click("#slo-targets button:has-text(\"the run's\")")
    tab.wait_for_function("() => window.__lanes.slo.ttft_ms === 500")
    assert met("static") == "2 / 25%"
    assert tab.problems == []


def test_an_arrival_process_fills_the_request_rows_and_the_mix_runs(tab, server):
    open_page(tab, server)
    tab.wait_for_selector("[data-field='requests[0].id']", state="attached")
    tab.click("#editor-details summary")
    tab.click("#arrival-process summary")
    tab.fill("[data-field='generate.n']", "5")
    tab.fill("[data-field='generate.rate']", "4")
    tab.fill("[data-field='generate.burstiness']", "0.5")
    tab.fill("[data-field='generate.seed']", "3")
    tab.fill("[data-field='generate.prompt_words']", "6-10")
    # 1) a 400 from /api/generate lands next to its field
    tab.fill("[data-field='generate.output_tokens']", "0-4")
    tab.click("#generate")
    tab.wait_for_function("() => document.querySelector(\"[data-error-for='generate.output_tokens']\").textContent !== ''")
    assert "min" in tab.text_content("[data-error-for='generate.output_tokens']")
    assert tab.locator("table.mix tbody tr").count() == 8  # the rows are untouched

    # 2) Generate: the rows are the drawn requests, arrivals in ms, editable like any others
    tab.fill("[data-field='generate.output_tokens']", "2,3")
    tab.click("#generate")
    tab.wait_for_selector("[data-field='requests[0].arrival_ms']", state="attached")
    assert tab.locator("table.mix tbody tr").count() == 5
    assert tab.is_checked("#arrival-unit-ms")
    arrivals = [float(tab.input_value(f"[data-field='requests[{i}].arrival_ms']")) for i in range(5)]
    assert arrivals[0] == 0 and arrivals == sorted(arrivals) and arrivals[-1] > 0
    assert {tab.input_value(f"[data-field='requests[{i}].max_new_tokens']") for i in range(5)} <= {"2", "3"}
    assert tab.text_content("[data-error-for='generate.output_tokens']") == ""

    # 3) the link reproduces the mix, generated arrivals and the panel included
    link = tab.url
    assert "#mix=" in link
    tab.goto("about:blank")
    open_page(tab, link)
    tab.wait_for_selector("[data-field='requests[4].arrival_ms']", state="attached")
    assert tab.locator("table.mix tbody tr").count() == 5
    assert [float(tab.input_value(f"[data-field='requests[{i}].arrival_ms']")) for i in range(5)] == arrivals
    assert tab.input_value("[data-field='generate.burstiness']") == "0.5"

    # 4) it runs by itself (a shared link is meant to be watched): both lanes see the same arrivals, and the page's
    # metrics are the server's
    wait_finished(tab)
    assert lanes(tab, "metricsCheck") == "ok"
    for name in lanes(tab, "order"):
        got = sorted(a["arrival_ms"] for a in lanes(tab, f"lanes[{name!r}].arrivals"))
        assert got == pytest.approx(arrivals)
        assert last_end(lanes(tab, f"lanes[{name!r}]")) >= arrivals[-1]
    # the browser logs the refused /api/generate (step 1) as a failed resource; nothing else went wrong
    assert [p for p in tab.problems if "status of 400" not in p] == []
    assert len(tab.problems) == 1


def test_long_prompt_lesson_shows_numbers_from_the_run(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="long-prompt"]')
    tab.wait_for_function("() => window.__lanes.status === 'running' || window.__lanes.status === 'finished'",
                          timeout=RUN_TIMEOUT_MS)
    assert "{" not in tab.text_content("#lesson")  # unknown values show as "…", never as a raw placeholder
    wait_finished(tab)
    assert lanes(tab, "metricsCheck") == "ok"
    tab.wait_for_function("() => !document.getElementById('lesson').textContent.includes('\u2026')")
    lesson = tab.text_content("#lesson")
    assert "{" not in lesson and "}" not in lesson
    # the numbers are the run's: LONG's prompt tokens from its prefill cells, static's longest step share
    records = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())["records"]
    cells = [c for lane in records.values() for r in lane for c in r["slots"] if c["request"] == "LONG" and c.get("prefill")]
    prompt_tokens = cells[0]["prefill"][1]
    static = lanes(tab, "lanes.static")
    longest = max(r["ms"] for r in records["static"])
    share_pct = math.floor(longest / static["ends"][-1] * 100 + 0.5)  # as the page rounds (Math.round)
    assert f"A {prompt_tokens}-token prompt" in lesson
    assert f"4 x {prompt_tokens} tokens, {share_pct}% of its wall time" in lesson
    assert re.search(r"\d", lesson)
    assert lanes(tab, "order") == ["static", "continuous", "chunked 64"]
    use_ms_clock(tab)
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-long-prompt-ms.png"), full_page=True)
    assert tab.problems == []


@pytest.mark.model  # prompt lookup needs the model's tokens
def test_the_editor_sets_prefix_cache_and_prompt_lookup_on_a_lane(tab, server):
    """Both issue-14 options from the editor's fields: only continuous lanes offer the prefix cache, a lookup k on
    any lane; the run's lane carries both (its title says so, the speculative column shows); the link keeps them."""
    open_page(tab, server)
    tab.wait_for_selector("[data-field='lanes[1].name']", state="attached")
    tab.click("#editor-details summary")
    assert tab.input_value("[data-field='lanes[1].policy']") == "continuous"
    assert tab.is_hidden("[data-field='lanes[0].prefix_cache']") and tab.is_visible("[data-field='lanes[1].prefix_cache']")
    tab.fill("[data-field='lanes[1].name']", "lookup")
    tab.select_option("[data-field='lanes[1].prefix_cache']", "on")
    tab.fill("[data-field='lanes[1].speculative']", "17")  # over the bound: refused on the page, by field
    tab.click("#run-mix")
    tab.wait_for_selector("[data-field='lanes[1].speculative'][aria-invalid=true]")
    assert tab.text_content("[data-error-for='lanes[1].speculative']")
    tab.fill("[data-field='lanes[1].speculative']", "3")
    tab.click("#run-mix")
    tab.wait_for_function("() => window.__lanes.ticks >= 1", timeout=RUN_TIMEOUT_MS)
    wait_finished(tab)
    assert lanes(tab, "lanes['lookup'].title") == "lookup \u2014 continuous, prefix cache, prompt lookup k 3"
    assert tab.locator('#metrics-table td[data-lane="lookup"][data-metric="speculative"]').count() == 1
    assert lanes(tab, "metricsCheck") == "ok"
    # the mix in the link brings both fields back as they were
    tab.goto(server + "/" + tab.evaluate("() => location.hash"))
    tab.wait_for_selector("[data-field='lanes[1].name']", state="attached")
    assert tab.input_value("[data-field='lanes[1].prefix_cache']") == "on"
    assert tab.input_value("[data-field='lanes[1].speculative']") == "3"
