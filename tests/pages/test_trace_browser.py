"""The editor's trace panel in headless Chromium against `python -m app --backend sim`: a shipped Mooncake slice
replayed through /api/generate fills the rows, runs with its 32-token KV blocks and the slice's description, and a
bad field is refused next to it (by the page, or by the server's 400). Every wait is on state the page exposes."""
import pytest

from tests.kit.page import lanes, open_page, stored, wait_finished

pytestmark = pytest.mark.browser


def test_the_trace_panel_replays_a_mooncake_slice_and_a_refused_field_lands_next_to_it(tab, server):
    open_page(tab, server)
    tab.click("#editor-details summary")
    tab.click("#trace-replay summary")
    tab.select_option("[data-field='trace.file']", "mooncake-conversation.jsonl")
    tab.fill("[data-field='trace.window']", "6:1")
    tab.click("#replay-trace")
    assert "START:END" in tab.text_content("[data-error-for='trace.window']")  # the page's own check
    tab.fill("[data-field='trace.window']", "0:6")
    tab.fill("[data-field='trace.length_scale']", "0.01")
    tab.click("#replay-trace")
    tab.wait_for_function("() => document.querySelector(\"[data-error-for='trace.length_scale']\").textContent")
    assert "whole number" in tab.text_content("[data-error-for='trace.length_scale']")  # the server's 400
    tab.fill("[data-field='trace.length_scale']", "0.0625")
    tab.fill("[data-field='trace.limit']", "12")
    tab.click("#replay-trace")
    tab.wait_for_selector("[data-field='requests[11].prompt']", state="attached")
    assert tab.locator("[data-field$='].prompt']").count() == 12
    before = lanes(tab, "runId")
    tab.click("#run-mix")
    tab.wait_for_function("(id) => window.__lanes.runId && window.__lanes.runId !== id", arg=before)
    wait_finished(tab)
    workload = stored(server, lanes(tab, "runId"))["workload"]
    assert workload["kv_block_size"] == 32 and len(workload["requests"]) == 12
    assert workload["description"].startswith("Trace mooncake-conversation.jsonl, seconds 0-6: 12 requests (the first 12)")
    assert [p for p in tab.problems if "400" not in p] == []  # the refused /api/generate is the only failed request
