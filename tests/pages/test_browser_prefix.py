"""The shared-instructions preset in headless Chromium against `python -m app` on the simulator (the real model for
tests marked model): the prefix cache's hits drawn as a light striped part of their P cells, its legend entry, its
metrics columns (the page's numbers equal to the server's), the lesson filled from the run. Waits on state the page
exposes, never a sleep."""
import json
from urllib.request import urlopen

import pytest

from tests.kit.browser import ARTIFACTS, pixels, rgb, share
from tests.kit.page import lanes, open_page, wait_finished

pytestmark = pytest.mark.browser


def test_shared_instructions_draws_cached_prefills_and_counts_prompt_tokens(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="shared-instructions"]')
    wait_finished(tab)
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit && window.__lanes.limit > 0")
    assert lanes(tab, "metricsCheck") == "ok"  # metrics.js and engine/report/metrics.py agree, the new numbers too

    # 1) the numbers: the cached lane computed fewer prompt tokens, took the rest from the cache
    plain, cached = (lanes(tab, f"lanes[{n!r}].metrics") for n in ("continuous", "prefix cache"))
    assert plain["prompt_tokens_cached"] == 0 and cached["prompt_tokens_cached"] > 0
    assert cached["prompt_tokens_computed"] + cached["prompt_tokens_cached"] == plain["prompt_tokens_computed"]
    cell = tab.text_content('#metrics-table td[data-lane="prefix cache"][data-metric="prompt_tokens"]')
    assert cell == f"{cached['prompt_tokens_computed']} / {cached['prompt_tokens_cached']}"
    assert tab.text_content('#metrics-table td[data-lane="prefix cache"][data-metric="prefix_cache_hit_rate"]') == \
        f"{round(cached['prefix_cache_hit_rate'] * 100)}%"
    lesson = tab.text_content("#lesson")
    assert "\u2026" not in lesson and f"{cached['prompt_tokens_computed']} prompt tokens" in lesson

    # 2) the canvas: a hit's P cell is light and striped over its cached share, plain orange over the rest
    stored = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())
    step, row, hit = next((r["step"], i, c) for r in stored["records"]["prefix cache"]
                          for i, c in enumerate(r["slots"]) if c.get("cached"))
    rect = tab.evaluate(f"() => window.__lanes.cellRect('prefix cache', {step}, {row})")
    palette = lanes(tab, "palette")
    left = pixels(tab, {"x": rect["x"] + 3, "y": rect["y"] + 3, "w": 4, "h": rect["h"] - 6})
    assert 0.4 < share(rgb(palette["prefillCached"]), left) < 0.95  # the tint, with its stripes over it
    assert 0 < hit["cached"] < hit["prefill"][1]
    first = stored["records"]["prefix cache"][0]["slots"]  # Q1 computed its whole prompt: plain prefill
    row = next(i for i, c in enumerate(first) if c["state"] == "prefill")
    assert "cached" not in first[row]
    rect = tab.evaluate(f"() => window.__lanes.cellRect('prefix cache', 1, {row})")
    plain_left = pixels(tab, {"x": rect["x"] + 3, "y": rect["y"] + 3, "w": 4, "h": rect["h"] - 6})
    assert share(rgb(palette["prefill"]), plain_left) > 0.6 and share(rgb(palette["prefillCached"]), plain_left) == 0
    tab.keyboard.press("Home")
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")  # step 2: Q2 joins and hits the blocks Q1 computed in step 1
    tab.wait_for_function("() => window.__lanes.narration.startsWith('Step 2')")
    total = stored["records"]["prefix cache"][1]["slots"][1]["prefill"][1]
    assert f"Q2 takes {hit['cached']} of {total} prompt tokens from the prefix cache" in lanes(tab, "narration")
    legend = [i["label"] for i in lanes(tab, "legend")]
    assert "prefill from the prefix cache" in legend
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-prefix-cache.png"), full_page=True)
    assert tab.problems == []
