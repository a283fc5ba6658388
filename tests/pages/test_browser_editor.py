"""The editor keeps a preset exactly: its one-line prompt field used to drop a prompt's newlines (long-prompt's
fourth prompt ran 467 tokens instead of 468 once edited), so an edited-unchanged preset ran other tokens. In headless
Chromium against `python -m app --backend sim`; every wait is on state the page exposes, never a sleep.
"""
import json

import pytest

from tests.kit.browser import ROOT
from tests.kit.page import lanes, open_page, stored, wait_finished

pytestmark = pytest.mark.browser

LONG_PROMPT = json.loads((ROOT / "demos" / "long-prompt.json").read_text())


def test_a_preset_run_from_the_editor_unchanged_sends_its_prompts_newlines_and_all(tab, server):
    assert any("\n" in q["prompt"] for q in LONG_PROMPT["requests"])
    open_page(tab, server)
    tab.click('#preset-buttons button[data-preset="long-prompt"]')
    wait_finished(tab, "long-prompt")
    from_button = lanes(tab, "runId")
    tab.click("#editor-details summary")
    fields = [tab.input_value(f"[data-field='requests[{i}].prompt']") for i in range(len(LONG_PROMPT["requests"]))]
    assert fields == [q["prompt"] for q in LONG_PROMPT["requests"]]   # shown as the preset has them
    tab.click("#run-mix")
    tab.wait_for_function("(id) => window.__lanes.runId !== id", arg=from_button)
    wait_finished(tab)
    edited = stored(server, lanes(tab, "runId"))["workload"]["requests"]
    assert [q["prompt"] for q in edited] == [q["prompt"] for q in LONG_PROMPT["requests"]]
    assert [q["prompt"] for q in edited] == [q["prompt"] for q in stored(server, from_button)["workload"]["requests"]]
    assert tab.problems == []
