"""Why a request waits, on the page (headless Chromium against `python -m app --backend sim`): the memory-pressure
preset's tight lane leaves a request waiting for KV blocks; at that step the requests view's tooltip over its queued
cell, the request panel and the narration all say how many blocks it is short, as the stored record does. Waits on
state the page exposes, never a sleep."""
import pytest

from tests.kit.browser import ARTIFACTS
from tests.kit.page import lanes, open_page, stored, wait_finished

pytestmark = pytest.mark.browser

LANE = "continuous KV 224"


def test_the_requests_view_the_request_panel_and_the_narration_say_a_request_is_kv_blocks_short(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="memory-pressure"]')
    wait_finished(tab)
    run = stored(server, lanes(tab, "runId"))
    step, rid, wait = next((r["step"], rid, w) for r in run["records"][LANE]
                           for rid, w in r.get("waits", {}).items() if w["reason"] == "kv_blocks")
    words = f"{wait['short']} KV block{'' if wait['short'] == 1 else 's'} short"

    # 1) the playhead at that step, in the requests view
    tab.keyboard.press("Home")
    for _ in range(step):
        tab.keyboard.press("ArrowRight")
    tab.wait_for_function("(s) => window.__lanes.narration.startsWith(`Step ${s} `)", arg=step)
    tab.click("label:has(input[name='view'][value='requests'])")
    tab.wait_for_function("() => window.__lanes.view === 'requests'")
    row = [str(q["id"]) for q in run["workload"]["requests"]].index(rid)
    rect = tab.evaluate(f"() => window.__lanes.cellRect({LANE!r}, {step}, {row})")
    tab.hover("#lanes", position={"x": rect["x"] + rect["w"] / 2, "y": rect["y"] + rect["h"] / 2})
    tab.wait_for_selector("#tooltip", state="visible")
    tip = tab.text_content("#tooltip")
    assert f"{rid} \u00b7" in tip and f"waits: {words}" in tip, tip

    # 2) the request panel for that lane says it too, as a glossary term
    tab.select_option("#request-lane", LANE)
    cell = tab.locator(f"#request-rows tr[data-request='{rid}'] .wait-reason")
    assert cell.text_content() == f"waits: {words}"
    assert cell.get_attribute("data-term") == "wait_kv_blocks"

    # 3) and the narration names a request that waits for KV blocks
    assert "KV block" in lanes(tab, "narration") and " short" in lanes(tab, "narration"), lanes(tab, "narration")
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-waits.png"), full_page=True)
    assert tab.problems == []
