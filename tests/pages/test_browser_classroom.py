"""The bugs a class would hit (issue 10), in headless Chromium against `python -m app` on the simulator (the real
model for tests marked model).

Your own run is yours (a click while it streams cancels and replaces it, never a refused submit), ids in the
editor, links that run, an unknown run, metrics at the playhead, and the words; WCAG contrast, the phone and 150%
zoom are in test_browser_access.py. Every socket event the page sends or gets is recorded by wrapping the
Socket.IO client before the page loads (`WIRE`). Every wait is on state the page exposes (`window.__lanes`, the
DOM), never a sleep.
"""
import base64
import json
import re
from urllib.parse import urlparse
from urllib.request import urlopen

import pytest

from tests.kit.page import RUN_TIMEOUT_MS, lanes, metric, open_page, wait_finished

pytestmark = pytest.mark.browser

# Wraps window.io as the page's vendor script defines it: every event in ("in") and out, in order, into window.__wire.
WIRE = """(() => {
  const wire = window.__wire = [];
  let wrapped;
  Object.defineProperty(window, 'io', { configurable: true, get: () => wrapped, set: (io) => {
    wrapped = Object.assign((...args) => {
      const socket = io(...args);
      const on = socket.on.bind(socket), emit = socket.emit.bind(socket);
      socket.on = (name, fn) => on(name, (payload, ...rest) => {
        wire.push({ dir: 'in', name, payload: name === 'tick' ? { run_id: payload.run_id, t: payload.t } : payload });
        return fn(payload, ...rest);
      });
      socket.emit = (name, ...args) => { wire.push({ dir: 'out', name, payload: args[0] }); return emit(name, ...args); };
      return socket;
    }, io);
  } });
})();"""

REFUSED = ("active_run", "rate_limited", "busy")


def wire(page, direction: str, name: str) -> list[dict]:
    return [e["payload"] for e in page.evaluate("() => window.__wire") if e["dir"] == direction and e["name"] == name]


def presets(url: str) -> dict:
    return {p["name"]: p for p in json.loads(urlopen(f"{url}/api/presets").read())["presets"]}


def pressed(page) -> list[str]:
    return page.eval_on_selector_all('#preset-buttons button[aria-pressed="true"]', "bs => bs.map(b => b.dataset.preset)")


def wait_mix_finished(page, name: str) -> None:
    """Until the run on the page is a finished run of the mix `name` (a run that ends otherwise fails the test)."""
    page.wait_for_function("""(name) => { const l = window.__lanes;
        return l.status === 'error' || (l.status === 'finished' && l.mix === name); }""", arg=name, timeout=RUN_TIMEOUT_MS)
    assert lanes(page, "status") == "finished", lanes(page, "error")


def mix_link(url: str, workload: dict) -> str:
    raw = json.dumps({"workload": workload}).encode()
    return f"{url}/#mix={base64.urlsafe_b64encode(raw).decode().rstrip('=')}"


# --- bug 1: your own run ---------------------------------------------------------------------------------------

@pytest.mark.model  # a run that streams long enough to be cancelled
def test_a_preset_clicked_while_your_run_streams_cancels_it_and_runs_the_new_one(tab, server):
    tab.add_init_script(WIRE)
    open_page(tab, server)
    tab.click('button[data-preset="memory-pressure"]')
    tab.wait_for_function("() => window.__lanes.status === 'running' && window.__lanes.ticks >= 1", timeout=RUN_TIMEOUT_MS)
    first = lanes(tab, "runId")
    assert lanes(tab, "own") is True  # the run this page submitted is its own, also once it started
    assert "stops your current run" in tab.get_attribute('button[data-preset="same"]', "title")  # the page says so
    tab.click('button[data-preset="same"]')
    wait_mix_finished(tab, "same")

    errors = wire(tab, "in", "run_error")
    assert [e for e in errors if e.get("code") in REFUSED] == []  # no doomed submit
    assert [(e["run_id"], e["code"]) for e in errors] == [(first, "cancelled")]  # only the run we stopped
    assert [c["run_id"] for c in wire(tab, "out", "cancel")] == [first]
    submits = wire(tab, "out", "submit")
    assert [s["workload"]["name"] for s in submits] == ["memory-pressure", "same"]
    log = [(e["dir"], e["name"], (e["payload"] or {}).get("run_id")) for e in tab.evaluate("() => window.__wire")]
    second_submit = [i for i, e in enumerate(log) if e[:2] == ("out", "submit")][1]
    assert log.index(("in", "run_error", first)) < second_submit  # submitted once the server confirmed the cancel

    # the canvas, lesson, pressed preset, URL and editor all show `same`; no red error line
    assert lanes(tab, "error") is None
    assert tab.get_attribute("#run-status", "data-tone") != "error"
    assert lanes(tab, "runId") != first and lanes(tab, "own") is True
    assert lanes(tab, "order") == ["static", "continuous"]
    assert lanes(tab, "lanes.static.steps") == 8 and lanes(tab, "lanes.continuous.steps") == 8
    same = presets(server)["same"]
    assert tab.text_content("#lesson") == same["description"]
    assert pressed(tab) == ["same"]
    url = urlparse(tab.url)
    assert url.fragment == "preset=same" and url.path == f"/runs/{lanes(tab, 'runId')}"
    assert tab.locator("table.mix tbody tr").count() == len(same["requests"])
    assert [tab.input_value(f"[data-field='requests[{i}].prompt']") for i in range(len(same["requests"]))] == \
        [q["prompt"] for q in same["requests"]]
    assert tab.problems == []


@pytest.mark.model  # runs that are still running when the next click comes
def test_ten_rapid_preset_clicks_never_exhaust_the_submit_rate_limit(tab, server):
    tab.add_init_script(WIRE)
    open_page(tab, server)
    clicks = ["same", "one-long", "mixed", "priorities", "same", "slots", "mixed", "one-long", "priorities", "same"]
    for name in clicks:
        tab.click(f'button[data-preset="{name}"]')
    wait_mix_finished(tab, "same")
    assert pressed(tab) == ["same"] and urlparse(tab.url).fragment == "preset=same"
    errors = wire(tab, "in", "run_error")
    assert [e for e in errors if e.get("code") in REFUSED] == []
    assert all(e["code"] == "cancelled" for e in errors), errors
    submits = wire(tab, "out", "submit")
    started = {e["run_id"] for e in wire(tab, "in", "run_started")}
    queued = {e["run_id"] for e in wire(tab, "in", "run_queued")}
    # every submit became a run, and clicks made while one is live replace each other: far fewer than 10 submits
    assert len(submits) == len(queued) <= len(started)
    assert len(submits) <= 5, [s["workload"]["name"] for s in submits]
    assert submits[-1]["workload"]["name"] == "same"
    assert lanes(tab, "error") is None
    assert tab.problems == []


# --- bugs 2 and 3: the editor ----------------------------------------------------------------------------------

def test_add_request_after_a_removal_takes_the_lowest_unused_id(tab, server):
    open_page(tab, server)
    tab.wait_for_selector("[data-field='requests[7].id']", state="attached")
    tab.click("#editor-details summary")
    tab.locator("table.mix button.remove").nth(1).click()  # R2
    tab.click("button:has-text('+ Add request')")
    ids = [tab.input_value(f"[data-field='requests[{i}].id']") for i in range(8)]
    assert ids == ["R1", "R3", "R4", "R5", "R6", "R7", "R8", "R2"]
    tab.click("button:has-text('+ Add request')")
    assert tab.input_value("[data-field='requests[8].id']") == "R9"
    assert tab.problems == []


def test_run_this_mix_scrolls_the_lanes_into_view(tab, server):
    open_page(tab, server)
    tab.wait_for_selector("[data-field='requests[1].id']", state="attached")
    tab.click("#editor-details summary")
    for button in tab.query_selector_all("table.mix button.remove")[2:]:
        button.click()
    for i in range(2):
        tab.fill(f"[data-field='requests[{i}].max_new_tokens']", "2")
    stage_in_view = """() => { const r = document.querySelector('.stage').getBoundingClientRect();
        return r.top >= -1 && r.top < window.innerHeight * 0.25; }"""
    tab.locator("#run-mix").scroll_into_view_if_needed()
    assert not tab.evaluate(stage_in_view)
    tab.click("#run-mix")
    tab.wait_for_function(stage_in_view)
    wait_finished(tab)

    # with reduced motion the page jumps there at once: one scroll position, no glide
    tab.emulate_media(reduced_motion="reduce")
    tab.locator("#run-mix").scroll_into_view_if_needed()
    tab.evaluate("""() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
        window.__scrolls = []; addEventListener('scroll', () => __scrolls.push(scrollY)); done(); })))""")
    tab.click("#run-mix")
    tab.wait_for_function(stage_in_view)
    tab.wait_for_function("() => window.__lanes.status === 'finished' && window.__lanes.runId !== null")
    assert len(set(tab.evaluate("() => window.__scrolls"))) == 1
    assert tab.problems == []


# --- bugs 4 and 5: links -------------------------------------------------------------------------------------

def test_a_preset_link_runs_it_a_mix_link_runs_too_and_a_first_visit_presses_nothing(tab, server):
    open_page(tab, server)
    tab.wait_for_selector("[data-field='requests[0].id']", state="attached")
    assert pressed(tab) == []  # nothing ran, so nothing looks pressed
    narration = lanes(tab, "narration")
    assert "press Run" not in narration, narration
    screen = [tab.text_content(s) for s in ("#lesson", "#empty")] + [narration]  # issue 38: said once, not three times
    assert sum("Pick a preset above" in text for text in screen) == 1 and "Pick a preset above" in screen[0], screen
    assert lanes(tab, "status") == "idle"

    tab.goto("about:blank")
    open_page(tab, f"{server}/#preset=arrivals")
    wait_mix_finished(tab, "arrivals")
    assert pressed(tab) == ["arrivals"] and urlparse(tab.url).fragment == "preset=arrivals"
    assert lanes(tab, "own") is True

    workload = {"name": "two", "description": "a shared mix", "slots": 2, "lanes": ["static", "continuous"],
                "requests": [{"id": "A", "prompt": "Say hi.", "max_new_tokens": 2},
                             {"id": "B", "prompt": "Say yes.", "max_new_tokens": 3}]}
    tab.goto("about:blank")
    open_page(tab, mix_link(server, workload))
    wait_mix_finished(tab, "two")  # a shared link is meant to be watched: it runs as soon as the model is ready
    assert lanes(tab, "order") == ["static", "continuous"] and lanes(tab, "metricsCheck") == "ok"
    assert pressed(tab) == []
    assert tab.problems == []


def test_an_unknown_run_id_says_so_offers_the_presets_and_watches_nothing(tab, server):
    tab.add_init_script(WIRE)
    response = tab.goto(f"{server}/runs/no-such-run-42")
    assert response.status == 404
    tab.wait_for_function("() => window.__lanes && window.__lanes.connected && window.__lanes.model.ready")
    tab.wait_for_selector("#preset-buttons button[data-preset]")
    tab.wait_for_selector("#empty", state="visible")
    assert "There is no run with id no-such-run-42" in tab.text_content("#empty")
    assert "There is no run with id no-such-run-42" in lanes(tab, "narration")
    assert tab.is_enabled('button[data-preset="mixed"]')
    assert wire(tab, "out", "watch") == [] and wire(tab, "out", "submit") == []
    assert lanes(tab, "status") == "idle"
    assert [p for p in tab.problems if "404" not in p] == []  # the page itself is a 404


# --- bug 6: metrics at the playhead --------------------------------------------------------------------------

def test_metrics_table_and_lane_captions_follow_the_playhead(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="mixed"]')
    wait_finished(tab)
    records = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())["records"]
    tab.keyboard.press("Home")
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")
    tab.wait_for_function("() => window.__lanes.shown === 2 && !window.__lanes.playing")
    for lane in ("static", "continuous"):
        tokens = sum(c["token_id"] is not None for r in records[lane][:2] for c in r["slots"])
        assert metric(tab, lane, "steps") == "2"
        assert metric(tab, lane, "tokens") == str(tokens)
        assert metric(tab, lane, "tokens_per_step") == f"{tokens / 2:.2f}"
        assert lanes(tab, f"lanes.{lane}.caption").startswith(f"step 2 of {len(records[lane])} \u00b7 {tokens / 2:.2f} tokens/step")
    check = tab.text_content("#metrics-check")
    assert "step 2" in check and "identical" not in check, check
    assert lanes(tab, "metricsCheck") == "ok"  # the check against the server is on the full records

    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    assert (metric(tab, "static", "steps"), metric(tab, "continuous", "steps")) == ("15", "9")
    assert lanes(tab, "lanes.static.caption") == "15 steps \u00b7 1.93 tokens/step \u00b7 slot use 48%"
    assert "identical to the server's numbers" in tab.text_content("#metrics-check")
    assert tab.problems == []


# --- bug 10: words -------------------------------------------------------------------------------------------

@pytest.mark.model  # the model's special tokens
def test_counts_are_pluralised_and_special_tokens_show_as_token_chips(tab, server):
    # one request of one token on a one-slot lane: every count on the page is 1
    workload = {"name": "one", "description": "one token", "slots": 1,
                "lanes": ["static", {"name": "one slot", "policy": "continuous", "slots": 1}],
                "requests": [{"id": "Q", "prompt": "Say hi.", "max_new_tokens": 1}]}
    open_page(tab, mix_link(server, workload))
    wait_mix_finished(tab, "one")
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    words = " ".join([tab.inner_text("main"), lanes(tab, "narration")] +
                     [lanes(tab, f"lanes[{n!r}].caption") + " " + lanes(tab, f"lanes[{n!r}].title") for n in lanes(tab, "order")])
    assert "1 step" in words
    assert re.findall(r"\b1 (?:blocks|steps|tokens|rows|requests|slots)\b", words) == [], words

    # mixed: R1 ignores EOS and its 8th token is <|im_end|>, a special token of the tokenizer
    tab.click('button[data-preset="mixed"]')
    wait_mix_finished(tab, "mixed")
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    tab.select_option("#request-lane", "continuous")
    written = tab.locator('#request-rows tr[data-request="R1"] td.written')
    assert written.locator(".token-chip").first.text_content() == "\u27e8im_end\u27e9"
    assert "<|im_end|>" in written.locator(".token-chip").first.get_attribute("title")
    assert "<|" not in written.text_content().replace(written.locator(".token-chip").first.text_content(), "")

    records = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())["records"]["continuous"]
    step, row = next((r["step"], i) for r in records for i, c in enumerate(r["slots"])
                     if c["request"] == "R1" and c.get("special"))
    rect = tab.evaluate(f"() => window.__lanes.cellRect('continuous', {step}, {row})")
    tab.hover("#lanes", position={"x": rect["x"] + rect["w"] / 2, "y": rect["y"] + rect["h"] / 2})
    tab.wait_for_selector("#tooltip", state="visible")
    tip = tab.text_content("#tooltip")
    assert tab.locator("#tooltip .token-chip").first.text_content() == "\u27e8im_end\u27e9"
    assert "<|im_end|>" not in tip
    assert "ignores EOS" in tip and "max_new_tokens (8)" in tip, tip
    assert tab.problems == []
