"""The speculative presets in headless Chromium against `python -m app` with the real model: the page's metrics
(computed from records whose cells may write several tokens) equal the server's, the lesson's numbers are the
run's, several-token cells are drawn and explained. Every wait is on state the page exposes, never a sleep."""
import json
from urllib.request import urlopen

import pytest

from tests.kit.browser import ARTIFACTS
from tests.kit.page import lanes, metric, open_page, wait_finished

pytestmark = [pytest.mark.browser, pytest.mark.model]


def test_quote_preset_draws_several_token_cells_and_agrees_with_the_server(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="spec-quote"]')
    wait_finished(tab)
    assert lanes(tab, "metricsCheck") == "ok"  # spec_acceptance_rate and tokens_per_decode_cell included
    assert lanes(tab, "order") == ["continuous", "prompt lookup"]
    assert lanes(tab, "lanes['prompt lookup'].title") == "prompt lookup \u2014 continuous, prompt lookup k 4"
    tab.keyboard.press("End")  # the table shows the numbers at the playhead: at the end, the whole run's
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit && !window.__lanes.playing")
    spec, plain = lanes(tab, "lanes['prompt lookup'].metrics"), lanes(tab, "lanes.continuous.metrics")
    assert spec["steps"] < plain["steps"] and spec["tokens"] == plain["tokens"]
    assert metric(tab, "prompt lookup", "speculative") == \
        f"{round(spec['spec_acceptance_rate'] * 100)}% \u00b7 {spec['tokens_per_decode_cell']:.2f}"
    assert metric(tab, "continuous", "speculative") == "\u2013"
    tab.wait_for_function("() => !document.getElementById('lesson').textContent.includes('\u2026')")
    assert f"{spec['steps']} steps where plain continuous needs {plain['steps']}" in tab.text_content("#lesson")
    assert any(item["label"] == "several tokens: proposals kept" for item in lanes(tab, "legend"))
    # a several-token cell: hovering it explains what it wrote
    records = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())["records"]["prompt lookup"]
    step, row, cell = next((r["step"], i, c) for r in records for i, c in enumerate(r["slots"]) if c.get("tokens"))
    rect = tab.evaluate("([s, r]) => window.__lanes.cellRect('prompt lookup', s, r)", [step, row])
    tab.hover("#lanes", position={"x": rect["x"] + rect["w"] / 2, "y": rect["y"] + rect["h"] / 2})
    tab.wait_for_function("() => document.getElementById('tooltip').textContent.includes('tokens in one step')")
    tip = tab.text_content("#tooltip")
    assert f"{len(cell['tokens'])} tokens in one step" in tip
    assert f"prompt lookup: proposed {cell['proposed']}, the model agreed with {cell['accepted']}" in tip
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-spec-quote.png"), full_page=True)
    assert tab.problems == []
