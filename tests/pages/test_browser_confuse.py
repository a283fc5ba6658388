"""Issue 20's editor bugs and the classroom's confusions, in headless Chromium against `python -m app --backend sim`:
a prompt over the limit is kept whole and refused by name (the browser used to cut it to 4,000 without a word);
a KV budget below one block is refused before submit, as the server would; the sweep page offers the simulator and
marks its results SIMULATED, and says why static's p95 TTFT can fall as the rate rises; the Live view captures by
time window with gaps compressed.

One server per module. Every wait is on state the page exposes (`window.__lanes`, `window.__sweep`, `window.__live`,
the DOM), never a sleep. Without /usr/bin/chromium these tests skip (unless BATCH_LANES_REQUIRE_BROWSER=1).
"""
import pytest

from tests.kit.page import lanes, mix_link, open_page, wait_finished

pytestmark = pytest.mark.browser

LONG_PROMPT = "Tell me a fact about the sea. " * 150  # 4,500 characters


def test_a_prompt_over_the_limit_is_kept_whole_and_refused_by_name_before_submit(tab, server):
    assert len(LONG_PROMPT) == 4500
    open_page(tab, server)
    tab.wait_for_selector("[data-field='requests[0].prompt']", state="attached")
    tab.click("#editor-details summary")
    tab.fill("[data-field='requests[0].prompt']", LONG_PROMPT)
    assert len(tab.input_value("[data-field='requests[0].prompt']")) == 4500  # never cut by the browser
    tab.click("#run-mix")
    slot = "[data-error-for='requests[0].prompt']"
    tab.wait_for_function("(s) => document.querySelector(s).textContent !== ''", arg=slot)
    assert tab.text_content(slot) == "is 4500 characters, the limit is 4000"
    assert tab.get_attribute("[data-field='requests[0].prompt']", "aria-invalid") == "true"
    assert tab.evaluate("() => window.__lanes.status") == "idle"  # nothing was sent
    tab.wait_for_timeout(800)  # past the live token count's 300 ms debounce: it never posts a prompt the server refuses
    assert tab.problems == []


def test_a_kv_budget_below_one_block_is_refused_by_the_editor_with_the_servers_limit(tab, server):
    open_page(tab, server)
    tab.wait_for_selector("[data-field='lanes[0].kv_budget']", state="attached")
    tab.click("#editor-details summary")
    assert tab.get_attribute("[data-field='kv_budget']", "min") == "16"  # from /api/limits: min_kv_budget
    tab.fill("[data-field='kv_budget']", "1")
    tab.fill("[data-field='lanes[0].kv_budget']", "15")
    tab.click("#run-mix")
    tab.wait_for_function("() => document.querySelector(\"[data-error-for='kv_budget']\").textContent !== ''")
    for name in ("kv_budget", "lanes[0].kv_budget"):
        text = tab.text_content(f"[data-error-for='{name}']")
        assert "kv_block_size is 16 tokens" in text and "from 16 to" in text
        assert tab.get_attribute(f"[data-field='{name}']", "aria-invalid") == "true"
    assert tab.evaluate("() => window.__lanes.status") == "idle"
    tab.fill("[data-field='kv_budget']", "")
    tab.fill("[data-field='lanes[0].kv_budget']", "16")  # one block: the editor lets the server judge it
    tab.click("#run-mix")
    # sent: a run, or the server's own answer (16 tokens hold no request of this mix), never the editor's block rule
    tab.wait_for_function("() => window.__lanes.error !== null || window.__lanes.status !== 'idle'")
    error = tab.evaluate("() => window.__lanes.error")
    assert error is None or "kv_block_size" not in error["message"], error
    assert tab.problems == []


def test_the_sweep_page_runs_on_the_simulator_marked_simulated_and_explains_static_ttft(tab, server):
    tab.goto(f"{server}/sweep")
    tab.wait_for_function("() => window.__sweep && window.__sweep.connected && window.__sweep.canSubmit")
    tab.wait_for_selector("#source option[value='preset:poisson']", state="attached")
    tab.select_option("#source", "preset:poisson")
    tab.select_option("#backend", "sim")
    tab.fill("#rates", "1, 4")
    tab.fill("#n", "4")
    assert "(SIMULATED)" in tab.text_content("#cost-note")
    tab.click("#run-sweep")
    tab.wait_for_function("() => window.__sweep.status === 'finished'", timeout=300_000)
    probe = tab.evaluate("() => window.__sweep")
    assert probe["simulated"] is True
    assert probe["simulatedBanner"].startswith("SIMULATED: no model ran")
    assert probe["tableCaption"].startswith("SIMULATED")
    assert probe["captions"]["ttft"].startswith("SIMULATED") and probe["captions"]["goodput"].startswith("SIMULATED")
    assert "SIMULATED" in tab.text_content("#sweep-status")
    assert "static's p95 TTFT can fall as the rate rises" in probe["groupNote"]
    assert tab.is_visible("#simulated-banner") and tab.is_visible("#group-note")
    assert tab.problems == []


def test_the_live_capture_asks_for_a_time_window_with_gaps_compressed(tab, server):
    tab.goto(f"{server}/live")
    tab.wait_for_function("() => window.__live && window.__live.capture")
    assert tab.get_attribute("#capture-download", "href") == "/api/live/capture?last=16&download=1"
    tab.select_option("#capture-by", "seconds")
    tab.fill("#capture-s", "300")
    tab.check("#capture-compress")
    tab.wait_for_function("() => window.__live.capture.by === 'seconds' && window.__live.capture.compress")
    href = tab.get_attribute("#capture-download", "href")
    assert href == "/api/live/capture?window_s=300&compress_over_s=3&compress_to_s=1&download=1"
    assert tab.is_visible("#capture-s") and tab.is_hidden("#capture-n")
    answer = tab.request.get(f"{server}{href}")
    assert answer.ok and answer.json()["requests"] == []
    assert tab.problems == []


STEP_ARRIVALS = {"name": "step arrivals", "description": "", "slots": 2, "lanes": ["static", "continuous"],
                 "requests": [{"id": "A", "prompt": "Name a fruit.", "max_new_tokens": 6, "arrival": 0},
                              {"id": "B", "prompt": "Say hi.", "max_new_tokens": 2, "arrival": 0},
                              {"id": "C", "prompt": "Name a colour.", "max_new_tokens": 3, "arrival": 4}]}


def test_step_arrival_marks_sit_at_that_step_on_each_lanes_own_ms_clock(tab, server):
    open_page(tab, mix_link(server, STEP_ARRIVALS))
    wait_finished(tab, "step arrivals")
    tab.click("label:has(input[name='clock'][value='ms'])")
    tab.wait_for_function("() => window.__lanes.clock === 'ms'")
    at = {}
    for lane in ("static", "continuous"):
        starts = lanes(tab, f"lanes[{lane!r}].starts")
        marks = {m["id"]: m for m in tab.evaluate(f"() => window.__lanes.marks({lane!r})")}
        assert marks["C"]["arrival_ms"] == starts[4]  # step 5 (the first C may join) starts here on this lane
        assert marks["A"]["arrival_ms"] == starts[0]
        at[lane] = marks["C"]
    assert at["static"]["arrival_ms"] != at["continuous"]["arrival_ms"]  # static's padded steps ran longer
    assert at["static"]["x"] != at["continuous"]["x"]
    tab.click("label:has(input[name='clock'][value='steps'])")
    tab.wait_for_function("() => window.__lanes.clock === 'steps'")
    xs = [tab.evaluate(f"() => window.__lanes.marks({lane!r}).find((m) => m.id === 'C').x") for lane in ("static", "continuous")]
    assert xs[0] == xs[1]  # on the steps clock both lanes put C at step 5
    assert tab.problems == []
