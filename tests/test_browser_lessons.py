"""Lessons a class can trust, in headless Chromium against `python -m app` on the simulator: one step numbering for
the whole page (steps counted from 1 in the lesson, the requests table and the editor), the noise line next to the
ms figures, and the lesson of `long-prompt` filled in from run_started. Every wait is on state the page exposes."""
import json
from urllib.request import urlopen

import pytest

from tests.kit.page import lanes, open_page, stored, to_end, wait_finished

pytestmark = pytest.mark.browser


def test_the_vip_arrives_at_the_same_step_in_the_lesson_the_requests_table_and_the_editor(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="priorities"]')
    wait_finished(tab, "priorities")
    to_end(tab)
    preset = next(p for p in json.loads(urlopen(f"{server}/api/presets").read())["presets"] if p["name"] == "priorities")
    vip = next(q for q in preset["requests"] if q["id"] == "VIP")
    step = vip["arrival"] + 1  # arrival 2: it may first join step 3, the page's step numbers counting from 1
    assert f"arrives at step {step} " in tab.text_content("#lesson")
    assert tab.text_content('#request-rows tr[data-request="VIP"] td.arrival').startswith(f"step {step} ")
    tab.click("#editor-details summary")
    arrivals = tab.eval_on_selector_all("[data-field^='requests['][data-field$='].arrival']", "xs => xs.map(x => x.value)")
    assert arrivals == [str(q["arrival"] + 1) for q in preset["requests"]]  # R1..R5 at step 1, the VIP at step 3
    assert arrivals[-1] == str(step)
    # the editor reads the step back as the server counts it: the same mix runs again with the VIP at arrival 2
    first = lanes(tab, "runId")
    tab.click("#run-mix")
    tab.wait_for_function("(first) => window.__lanes.runId !== first && window.__lanes.status === 'finished'", arg=first)
    again = stored(server, lanes(tab, "runId"))
    assert [q["arrival"] for q in again["workload"]["requests"]] == [q["arrival"] for q in preset["requests"]]


def test_a_simulated_run_says_beside_its_metrics_that_its_step_times_have_no_noise(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="long-prompt"]')
    wait_finished(tab, "long-prompt")
    to_end(tab)
    note = tab.locator("#noise")
    assert note.is_visible() and note.get_attribute("data-tone") == ""
    assert note.text_content() == "Simulated run: its step times come from a cost model, so they have no noise."
    lesson = tab.text_content("#lesson")
    spread = lanes(tab, "lanes.continuous.metrics.step_time_spread")
    assert spread == 0 and "\u2026" not in lesson and "so no step stalls for long" in lesson
