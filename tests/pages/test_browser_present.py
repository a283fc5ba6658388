"""Teaching with Batch Lanes, the two modes a class watches (issue 10, "For the class"; issue 20), in headless Chromium
at a projector's 1280x720 against `python -m app` on the simulator (the real model for tests marked model):
presenter mode never draws a cell label under 14 px or a KV label under 12 px (read from what the canvas drew,
window.__lanes.labels), so three and four lanes take turns on one screen with the narration, the lesson line and the
playback controls, and each lane's totals show inside Present at the end (after the reveal under
predict-then-reveal); predict-then-reveal keeps every total back until the playhead gets there. The fixtures and
helpers are test_browser_teach.py's.

Every check is on element geometry, pixels or text the page shows, and every wait is on state the page exposes
(`window.__lanes`, the DOM), never a sleep or a timing. Without /usr/bin/chromium these tests skip, unless
BATCH_LANES_REQUIRE_BROWSER=1 (CI), where they fail.
"""
import re

import pytest

from tests.kit.browser import ARTIFACTS
from tests.kit.page import MIXED, H, W, assert_presenter_fits, box, in_viewport, lanes, mix_link, run_preset, stored, \
    to_end, wait_finished
from tests.kit.page import open_projected as open_page

pytestmark = pytest.mark.browser

# the projector: conftest.py's `context` fixture reads this module's BROWSER_CONTEXT
BROWSER_CONTEXT = {"viewport": {"width": W, "height": H}}
FOUR = {**MIXED, "name": "four lanes", "lanes": ["static", "dynamic", "continuous",
                                                {"name": "chunked 32", "policy": "continuous", "chunk_size": 32}]}


# --- presenter mode ------------------------------------------------------------------------------------------

def font_px(page, selector: str) -> float:
    return page.eval_on_selector(selector, "n => parseFloat(getComputedStyle(n).fontSize)")


def assert_readable_from_the_back(page) -> None:
    """Every cell label the canvas drew is at least 14 px, every KV label at least 12 px; and some were drawn."""
    labels = lanes(page, "labels")
    cells = [label for label in labels if label["kind"] == "cell"]
    kv = [label for label in labels if label["kind"] == "kv"]
    assert kv, "no KV label drawn"
    assert all(label["px"] >= 14 for label in cells), sorted({(label["text"], label["px"]) for label in cells if label["px"] < 14})
    assert all(label["px"] >= 12 for label in kv), [(label["text"], label["px"]) for label in kv if label["px"] < 12]
    assert min(lane["rowH"] for lane in lanes(page, "layout.lanes")) >= 24


def shown_lanes(page) -> list[str]:
    return [lane["name"] for lane in lanes(page, "layout.lanes")]


def turn_to(page, key: str, first: int) -> None:
    page.keyboard.press(key)
    page.wait_for_function("(first) => window.__lanes.layout.turn && window.__lanes.layout.turn.from === first", arg=first)


def test_presenter_mode_fits_the_three_arrivals_lanes_on_a_projector_with_larger_type(context, tab, server):
    run_preset(tab, server, "arrivals")
    to_end(tab)
    assert lanes(tab, "clock") == "ms" and len(lanes(tab, "order")) == 3
    normal = lanes(tab, "layout.type")
    narration_px = font_px(tab, "#narration")
    assert tab.is_visible("#editor-details") and tab.is_visible("#metrics-table")

    tab.keyboard.press("p")
    tab.wait_for_function("() => window.__lanes.present && document.body.dataset.present === 'true'")
    # three lanes of four rows with their arrival marks do not fit at a readable size: two at a time, in turn
    assert lanes(tab, "layout.turn") == {"from": 0, "count": 2, "total": 3}
    assert_presenter_fits(tab, 2)
    assert_readable_from_the_back(tab)
    assert tab.inner_text("#lane-turn-text") == "lanes 1\u20132 of 3" and in_viewport(box(tab, "#lane-turn"))
    assert shown_lanes(tab) == lanes(tab, "order")[:2]
    turn_to(tab, "n", 1)  # the next turn ends at the last lane: lanes 2-3, not lane 3 alone
    assert shown_lanes(tab) == lanes(tab, "order")[1:] and tab.inner_text("#lane-turn-text") == "lanes 2\u20133 of 3"
    assert_presenter_fits(tab, 2)
    assert_readable_from_the_back(tab)
    turn_to(tab, "n", 0)  # round again
    tab.click("#btn-lanes-prev")
    tab.wait_for_function("() => window.__lanes.layout.turn.from === 1")
    turn_to(tab, "PageUp", 0)  # a presentation clicker's key
    # the lesson line and the totals stay inside Present: a class reads the reveal without leaving it
    assert tab.is_visible("#lesson") and in_viewport(box(tab, "#lesson")) and "continuous" in tab.inner_text("#lesson")
    totals = tab.inner_text("#present-totals")
    assert in_viewport(box(tab, "#present-totals"))
    for lane in lanes(tab, "order"):
        assert f"{lane}: {lanes(tab, f'lanes[{lane!r}].metrics.steps')} steps" in totals, totals
    big = lanes(tab, "layout.type")
    assert big["title"] > normal["title"] and big["label"] > normal["label"] and big["caption"] > normal["caption"]
    assert font_px(tab, "#narration") > narration_px
    assert tab.get_attribute("#btn-present", "aria-pressed") == "true"
    assert tab.is_visible("#preset-pick")  # the compact preset picker stays
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "teach-present-arrivals.png"))

    tab.keyboard.press("Escape")  # Esc leaves presenter mode
    tab.wait_for_function("() => !window.__lanes.present && document.body.dataset.present === 'false'")
    assert tab.is_visible("#editor-details") and tab.is_visible("#metrics-table")
    assert lanes(tab, "layout.type") == normal and lanes(tab, "layout.turn") is None and len(shown_lanes(tab)) == 3
    assert tab.is_hidden("#present-totals") and tab.is_hidden("#lane-turn")
    assert context.problems == []


def test_presenter_mode_keeps_a_two_lane_comparison_on_one_screen_every_label_at_least_14_px(context, tab, server):
    """swap-vs-recompute (two lanes of four slots, KV budgets, preemption flags) and paged-vs-reserve (two lanes of
    eight slots and arrival marks) each show both lanes at 1280x720, not one at a time (issue 38): rows may shrink
    below PRESENT_MIN's 24 px, to 14 px at the least, and every label the canvas drew (cells, rows, KV bars, flags,
    titles, the legend's words and its swatches' letters) is at least 14 px; the lesson is one line, the run line whole,
    not cut off. The second preset is picked from Present's own preset picker, as a teacher would."""
    run_preset(tab, server, "swap-vs-recompute")
    to_end(tab)
    tab.keyboard.press("p")
    # what each draws: paged-vs-reserve's 162 steps leave its cells too narrow for any label (none under 14 px, then)
    drawn = {"swap-vs-recompute": {"cell", "row", "kv", "flag", "legend", "title"},
             "paged-vs-reserve": {"row", "kv", "flag", "legend", "title"}}
    for preset in drawn:
        if preset != lanes(tab, "mix"):
            tab.select_option("#preset-pick", preset)
            wait_finished(tab, preset)
            to_end(tab)
        tab.wait_for_function("() => window.__lanes.present && window.__lanes.layout.turn")
        assert lanes(tab, "layout.turn") == {"from": 0, "count": 2, "total": 2} and tab.is_hidden("#lane-turn"), preset
        assert_presenter_fits(tab, 2)
        assert min(lane["rowH"] for lane in lanes(tab, "layout.lanes")) >= 14  # PRESENT_PAIR's floor
        assert tab.evaluate("() => { const l = document.getElementById('lesson');"  # one line in Present
                            " return l.getBoundingClientRect().height <= parseFloat(getComputedStyle(l).lineHeight) + 1; }")
        labels = lanes(tab, "labels")
        assert drawn[preset] <= {label["kind"] for label in labels}, preset
        small = sorted({(label["kind"], label["text"], label["px"]) for label in labels if label["px"] < 14})
        assert not small, (preset, small)
        run_line = tab.eval_on_selector("#run-status", "n => [n.scrollWidth, n.clientWidth, n.textContent]")
        assert run_line[0] <= run_line[1] and run_line[2].startswith("Finished"), run_line
        assert in_viewport(box(tab, "#run-status"))
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / f"present-{preset}.png"))
    assert context.problems == []


def test_presenter_mode_shows_a_four_lane_mix_in_turn_every_label_readable_from_the_back(context, tab, server):
    open_page(tab, mix_link(server, FOUR))  # a shared mix runs by itself
    wait_finished(tab, "four lanes")
    to_end(tab)
    label = lanes(tab, "layout.type.label")
    tab.click("#btn-present")
    tab.wait_for_function("() => window.__lanes.present")
    assert lanes(tab, "layout.turn") == {"from": 0, "count": 2, "total": 4}
    assert lanes(tab, "layout.type.label") > label
    seen = []
    for first in (0, 2):  # lanes 1-2, then 3-4: each turn fits the projector, stacked, every label readable
        if first:
            tab.click("#btn-lanes-next")
            tab.wait_for_function("(f) => window.__lanes.layout.turn.from === f", arg=first)
        assert_presenter_fits(tab, 2)
        assert_readable_from_the_back(tab)
        assert any(label["kind"] == "cell" for label in lanes(tab, "labels"))  # cells are labelled, not left bare
        grids = [lane["grid"] for lane in lanes(tab, "layout.lanes")]
        assert all(a["y"] + a["h"] < b["y"] for a, b in zip(grids, grids[1:]))  # stacked, never overlapping
        seen += shown_lanes(tab)
    assert seen == lanes(tab, "order")
    totals = tab.inner_text("#present-totals")  # the four lanes' totals, all on the one screen
    assert all(f"{lane}: " in totals for lane in seen) and in_viewport(box(tab, "#present-totals"))
    assert "15 vs 9 steps" in tab.inner_text("#lesson") and in_viewport(box(tab, "#lesson"))
    tab.click("#btn-present")
    tab.wait_for_function("() => !window.__lanes.present")
    assert len(shown_lanes(tab)) == 4
    assert context.problems == []


def test_present_with_predict_then_reveal_shows_the_final_totals_inside_present_only_at_the_reveal(context, tab, server):
    open_page(tab, mix_link(server, FOUR))
    wait_finished(tab, "four lanes")
    tab.keyboard.press("r")
    tab.wait_for_function("() => window.__lanes.reveal")
    tab.keyboard.press("p")
    tab.wait_for_function("() => window.__lanes.present")
    tab.keyboard.press("Home")
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")
    tab.wait_for_function("() => window.__lanes.shown === 2 && !window.__lanes.playing")
    assert "steps" not in tab.inner_text("#present-totals")  # held back: nothing of the totals yet
    assert tab.get_attribute("#present-totals", "data-shown") == "false"
    assert in_viewport(box(tab, "#lesson")) and "Predict first" in tab.inner_text("#lesson")
    to_end(tab)
    tab.wait_for_function("() => window.__lanes.revealed")
    tab.wait_for_function("() => document.querySelector('#present-totals').dataset.shown === 'true'")
    run = stored(server, lanes(tab, "runId"))["metrics"]
    totals = tab.inner_text("#present-totals")
    for lane in lanes(tab, "order"):  # the server's numbers, as the metrics table would write them
        m = run[lane]
        assert f"{lane}: {m['steps']} steps \u00b7 {m['wall_s']:.2f} s \u00b7 TTFT {round(m['mean_ttft_ms'])} ms" in totals, totals
    assert in_viewport(box(tab, "#present-totals")) and tab.is_hidden("#metrics-table")
    assert "15 vs 9 steps" in tab.inner_text("#lesson") and in_viewport(box(tab, "#lesson"))
    assert_presenter_fits(tab, 2)
    assert context.problems == []


# --- predict, then reveal ------------------------------------------------------------------------------------

def shown_text(page) -> str:
    """The text a class reads: the metrics panel, the run line, the readout, the narration, the lesson, the captions."""
    parts = [page.inner_text(s) for s in ("#metrics-table", "#metrics-check", "#run-status", "#readout", "#narration",
                                          "#lesson")]
    return "\n".join(parts + [lanes(page, f"lanes[{n!r}].caption") for n in lanes(page, "order")])


def final_numbers(metrics: dict) -> list[str]:
    """A lane's final numbers as the page writes them (steps aside: checked on their own)."""
    return [f"{metrics['tokens_per_step']:.2f}", f"{round(metrics['slot_use'] * 100)}%", f"{metrics['wall_s']:.2f}",
            f"{metrics['tokens_per_s']:.1f}", f"{metrics['requests_per_s']:.2f}", str(round(metrics['mean_ttft_ms']))]


@pytest.mark.model  # the request panel's text is the model's tokens
def test_predict_then_reveal_shows_nothing_the_playhead_has_not_reached(context, tab, server):
    open_page(tab, server)
    tab.click("label:has(#reveal)")  # the switch, before the run
    tab.wait_for_function("() => window.__lanes.reveal")
    tab.click('button[data-preset="mixed"]')
    wait_finished(tab, "mixed")
    server_metrics = stored(server, lanes(tab, "runId"))["metrics"]
    assert (server_metrics["static"]["steps"], server_metrics["continuous"]["steps"]) == (15, 9)
    tab.keyboard.press("Home")
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")
    tab.wait_for_function("() => window.__lanes.shown === 2 && !window.__lanes.playing")

    # 1) at step 2 no total anywhere: not 15 steps, not "9 steps", none of the final metrics
    text = shown_text(tab)
    assert not re.search(r"(?<![\d.])15(?![\d.])", text), text
    assert "9 steps" not in text and "of 15" not in text and "shared step" not in text, text
    for lane in ("static", "continuous"):
        for number in final_numbers(server_metrics[lane]):
            assert number not in text, (lane, number, text)
    assert tab.inner_text("#readout") == "step 2"
    assert tab.eval_on_selector_all('#metrics-table td[data-lane]', "cells => cells.map(c => c.textContent)") == \
        ["?"] * len(tab.query_selector_all('#metrics-table td[data-lane]'))
    # the request panel writes what was written up to the playhead, no further
    records = stored(server, lanes(tab, "runId"))["records"]["continuous"]
    r1 = "".join(c["token"] for r in records[:2] for c in r["slots"] if c["request"] == "R1")
    assert tab.text_content('#request-rows tr[data-request="R1"] td.written') == r1
    # 2) the x-axis does not say how long the run is: it spans less than 15 steps, and so does the scrubber
    assert lanes(tab, "axis.full") < 15 and lanes(tab, "layout.domain") < 15
    assert float(tab.get_attribute("#scrub", "max")) < 15
    # 3) off restores everything at once
    tab.keyboard.press("r")
    tab.wait_for_function("() => !window.__lanes.reveal")
    assert tab.inner_text("#readout") == "step 2 of 15" and lanes(tab, "axis.full") == 15
    assert lanes(tab, "lanes.static.caption").startswith("step 2 of 15")
    tab.keyboard.press("r")
    tab.wait_for_function("() => window.__lanes.reveal && window.__lanes.axis.full < 15")

    # 4) End reveals everything, and it is the server's numbers
    to_end(tab)
    tab.wait_for_function("() => window.__lanes.revealed")
    assert lanes(tab, "axis.full") == 15 and tab.inner_text("#readout") == "step 15 of 15"
    assert "15 shared steps" in tab.inner_text("#run-status")
    assert lanes(tab, "lanes.static.caption") == "15 steps \u00b7 1.93 tokens/step \u00b7 slot use 48%"
    for lane in ("static", "continuous"):
        m = server_metrics[lane]
        cell = lambda key: tab.text_content(f'#metrics-table td[data-lane="{lane}"][data-metric="{key}"]')  # noqa: E731
        assert (cell("steps"), cell("tokens_per_step"), cell("slot_use")) == \
            (str(m["steps"]), f"{m['tokens_per_step']:.2f}", f"{round(m['slot_use'] * 100)}%")
        assert cell("wall_s") == f"{m['wall_s']:.2f}"
    assert lanes(tab, "metricsCheck") == "ok" and "identical" in tab.inner_text("#metrics-check")
    assert "15 vs 9 steps" in tab.inner_text("#lesson")
    assert context.problems == []


def test_present_after_the_reveal_of_three_lanes_still_fits_when_the_totals_and_the_lesson_grow(context, tab, server):
    """memory-pressure's three lanes: at the reveal its totals wrap to two lines and its lesson grows; the lanes
    made room for them (the playback controls used to drop below the fold until a resize)."""
    run_preset(tab, server, "memory-pressure")
    tab.keyboard.press("r")
    tab.wait_for_function("() => window.__lanes.reveal")
    tab.keyboard.press("p")
    tab.wait_for_function("() => window.__lanes.present")
    before = box(tab, "#present-totals")["height"]
    to_end(tab)
    tab.wait_for_function("() => window.__lanes.revealed && document.querySelector('#present-totals').dataset.shown === 'true'")
    assert box(tab, "#present-totals")["height"] > before          # the three totals take two lines at 1280 px
    tab.wait_for_function("() => document.documentElement.scrollHeight <= innerHeight", timeout=10_000)
    assert_presenter_fits(tab, 2)
    assert context.problems == []
