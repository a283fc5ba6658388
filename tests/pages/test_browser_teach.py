"""Teaching with Batch Lanes (issue 10, "For the class"), in headless Chromium at a projector's 1280x720 against
`python -m app` on the simulator (paced, for jump to live): the glossary explains metric headers and
legend items on focus and on hover; the short link and its QR code; memory pressure readable from afar (a tall KV
bar, a preemption flag, zoom); the c and v keys, jump to live, and the editor's live prompt-token count. Presenter
mode and predict-then-reveal are in test_browser_present.py, which shares this module's fixtures and helpers.

Every check is on element geometry, pixels or text the page shows, and every wait is on state the page exposes
(`window.__lanes`, the DOM), never a sleep or a timing. Without /usr/bin/chromium these tests skip, unless
BATCH_LANES_REQUIRE_BROWSER=1 (CI), where they fail.
"""
import json
from urllib.parse import urlparse
from urllib.request import Request, urlopen

import pytest

from tests.kit.browser import pixels, rgb, share
from tests.kit.page import H, RUN_TIMEOUT_MS, W, assert_presenter_fits, box, canvas_rect, in_viewport, lanes, mix_link, \
    run_preset, stored, to_end, wait_finished
from tests.kit.page import open_projected as open_page

pytestmark = pytest.mark.browser

# the projector: conftest.py's `context` fixture reads this module's BROWSER_CONTEXT
BROWSER_CONTEXT = {"viewport": {"width": W, "height": H}}


def glossary(page) -> dict:
    """The one definitions module, as the page itself imports it."""
    return page.evaluate("async () => (await import('/static/js/core/glossary.js')).GLOSSARY")


# --- the glossary --------------------------------------------------------------------------------------------

def tab_to(page, term: str, start: str, limit: int = 60) -> None:
    """Focus `start`, then press Tab until the focused element explains `term`."""
    page.focus(start)
    for _ in range(limit):
        if page.evaluate("() => document.activeElement.dataset.term") == term:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {term!r}")


def assert_explained(page, term: str, definitions: dict) -> None:
    page.wait_for_selector("#glossary-tip", state="visible")
    tip = box(page, "#glossary-tip")
    assert in_viewport(tip), tip
    assert definitions[term]["text"] in page.text_content("#glossary-tip")
    assert page.get_attribute("#glossary-tip", "role") == "tooltip"


def test_glossary_explains_every_metric_header_and_legend_item_on_focus_and_hover(context, tab, server):
    run_preset(tab, server, "mixed")
    to_end(tab)
    definitions = glossary(tab)
    for key in ("ttft", "tpot", "itl", "slot_use", "tokens_per_step", "padding_cells", "preempted", "wall_time",
                "tokens_per_s", "requests_per_s", "latency", "prefill", "decode", "padding", "idle", "waiting",
                "arrival", "last_token", "queued", "kv"):
        assert definitions[key]["text"], key
    # every metric header and every legend item names a defined term, and points at the tooltip
    headers = tab.eval_on_selector_all("#metrics-table thead th", "ths => ths.slice(1).map(th => { const t = "
                                       "th.querySelector('[data-term]'); return t && [t.dataset.term, t.tabIndex, "
                                       "t.getAttribute('aria-describedby')]; })")
    assert all(h and h[0] in definitions and h[1] == 0 and h[2] == "glossary-tip" for h in headers), headers
    keys = tab.eval_on_selector_all(".legend-key", "ks => ks.map(k => k.dataset.term)")
    assert len(keys) == len(lanes(tab, "legend")) and set(keys) <= set(definitions), keys
    assert {"padding", "kv", "last_token"} <= set(keys)  # the KV strip joins the legend

    # 1) keyboard: Tab to a metrics header, then to a legend item
    tab_to(tab, "tpot", '#metrics-table thead [data-term="ttft"]')
    assert_explained(tab, "tpot", definitions)
    tab_to(tab, "padding", "#btn-present")
    assert_explained(tab, "padding", definitions)
    key = box(tab, '.legend-key[data-term="padding"]')
    item = next(i for i in lanes(tab, "legend") if i["label"].startswith("padding"))
    drawn = canvas_rect(tab, item)
    assert key["left"] <= drawn["left"] and key["right"] >= drawn["right"]  # over the drawn item
    tab.keyboard.press("Escape")
    tab.wait_for_selector("#glossary-tip", state="hidden")

    # 2) the mouse: hover a header and the KV strip's legend item
    tab.hover('#metrics-table thead [data-term="slot_use"]')
    assert_explained(tab, "slot_use", definitions)
    tab.locator('.legend-key[data-term="kv"]').scroll_into_view_if_needed()
    tab.hover('.legend-key[data-term="kv"]')
    assert_explained(tab, "kv", definitions)
    assert context.problems == []


# --- short links and the QR code -----------------------------------------------------------------------------

def test_link_to_this_run_copies_the_short_link_and_the_qr_code_shows_it(browser, server):
    context = browser.new_context(viewport={"width": W, "height": H})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        tab = context.new_page()
        run_preset(tab, server, "same")
        run_id = lanes(tab, "runId")
        assert tab.is_visible("#run-link") and tab.is_visible("#btn-qr")
        assert tab.get_attribute("#run-link", "href") == f"/runs/{run_id}"  # no #mix= hash: the run carries its mix
        tab.click("#run-link")
        tab.wait_for_function("() => document.getElementById('share-status').textContent.includes('copied')")
        assert "a replay of this run" in tab.text_content("#share-status")  # not a live run per opener, as #mix= is
        copied = tab.evaluate("() => navigator.clipboard.readText()")
        assert copied == f"{server}/runs/{run_id}" and "#" not in copied

        tab.click("#btn-qr")
        tab.wait_for_selector("#qr-popover", state="visible")
        tab.wait_for_function("() => { const i = document.getElementById('qr-img'); return i && i.complete && i.naturalWidth > 0; }")
        image = box(tab, "#qr-img")
        assert image["width"] >= 200 and image["height"] >= 200 and in_viewport(image), image
        assert urlparse(tab.get_attribute("#qr-img", "src")).path == f"/runs/{run_id}/qr.svg"
        assert tab.text_content("#qr-url") == copied
        tab.keyboard.press("Escape")
        tab.wait_for_selector("#qr-popover", state="hidden")

        # the short link replays the run: its mix, its lanes, the server's numbers
        other = context.new_page()
        other.goto(copied)
        other.wait_for_function("() => window.__lanes && window.__lanes.status === 'finished'", timeout=RUN_TIMEOUT_MS)
        assert lanes(other, "runId") == run_id and lanes(other, "mix") == "same"
        assert lanes(other, "order") == ["static", "continuous"] and lanes(other, "metricsCheck") == "ok"
    finally:
        context.close()


# --- memory pressure from the back of the room ---------------------------------------------------------------

def test_memory_pressure_shows_a_tall_kv_bar_a_preemption_flag_and_zooms_to_a_step_range(context, tab, server):
    run_preset(tab, server, "memory-pressure")
    to_end(tab)
    palette = lanes(tab, "palette")
    layout = lanes(tab, "layout")
    assert all(lane["kv"]["h"] >= 20 for lane in layout["lanes"]), [lane["kv"] for lane in layout["lanes"]]

    # 1) the preemption: a flag in the preempted colour, inside its lane, above its grid
    flags = tab.evaluate("() => window.__lanes.preemptions('continuous KV 224')")
    records = stored(server, lanes(tab, "runId"))["records"]["continuous KV 224"]
    assert [(f["step"], f["id"]) for f in flags] == [(r["step"], i) for r in records for i in r["preempted"]]
    lane = next(l for l in layout["lanes"] if l["name"] == "continuous KV 224")
    pill = flags[0]["pill"]
    assert lane["grid"]["x"] <= pill["x"] and pill["x"] + pill["w"] <= lane["grid"]["x"] + lane["grid"]["w"]
    assert lane["title"]["y"] + lane["title"]["h"] <= pill["y"] and pill["y"] + pill["h"] <= lane["grid"]["y"]
    assert pill["w"] >= 60 and pill["h"] >= 14  # a flag, not a 10-pixel cell
    assert share(rgb(palette["preempted"]), pixels(tab, pill), tolerance=12) > 0.5
    assert tab.evaluate("() => window.__lanes.preemptions('continuous KV 448')") == []

    # 2) zoom to steps 20-40 by dragging along the axis: a cell at least 3x wider; the playhead and metrics still work
    before = tab.evaluate("() => window.__lanes.cellRect('static', 30, 0)")
    canvas = tab.locator("#lanes").bounding_box()
    y = canvas["y"] + layout["axis"]["h"] / 2
    x20 = tab.evaluate("() => window.__lanes.cellRect('static', 21, 0).x")
    x40 = tab.evaluate("() => { const r = window.__lanes.cellRect('static', 40, 0); return r.x + r.w; }")
    tab.mouse.move(canvas["x"] + x20, y)
    tab.mouse.down()
    tab.mouse.move(canvas["x"] + (x20 + x40) / 2, y, steps=4)
    tab.mouse.move(canvas["x"] + x40, y, steps=4)
    tab.mouse.up()
    tab.wait_for_function("() => window.__lanes.zoom && window.__lanes.zoom.from === 20 && window.__lanes.zoom.to === 40")
    after = tab.evaluate("() => window.__lanes.cellRect('static', 30, 0)")
    assert after["w"] >= 3 * before["w"], (before, after)
    assert lanes(tab, "layout.origin") == 20 and lanes(tab, "playhead") == lanes(tab, "limit")  # the drag did not seek
    cell = tab.evaluate("() => window.__lanes.cellRect('continuous KV 224', 30, 0)")
    tab.evaluate("(y) => window.scrollBy(0, y)", canvas["y"] + cell["y"] - 360)  # the cell mid-viewport: a click
    canvas = tab.locator("#lanes").bounding_box()                                 # outside it would miss the page
    tab.mouse.click(canvas["x"] + cell["x"] + cell["w"] / 2, canvas["y"] + cell["y"] + cell["h"] / 2)
    tab.wait_for_function("() => window.__lanes.playhead === 30")
    assert tab.text_content('#metrics-table td[data-lane="continuous KV 224"][data-metric="steps"]') == "30"
    assert tab.text_content('#metrics-table td[data-lane="continuous KV 224"][data-metric="preemptions"]') == "1"
    tab.keyboard.press("]")  # the keys zoom too, around the playhead
    tab.wait_for_function("() => window.__lanes.zoom && window.__lanes.zoom.to - window.__lanes.zoom.from === 10")
    assert lanes(tab, "zoom.from") <= 30 <= lanes(tab, "zoom.to")
    tab.keyboard.press("[")
    tab.wait_for_function("() => window.__lanes.zoom && window.__lanes.zoom.to - window.__lanes.zoom.from === 20")
    tab.click("#btn-zoom-reset")
    tab.wait_for_function("() => window.__lanes.zoom === null")
    assert tab.evaluate("() => window.__lanes.cellRect('static', 30, 0)") == before

    # 3) presenter mode: the KV bars taller still, their budget line there, the flag still inside its lane; rows no
    # smaller than the back of the room reads, so two of the three lanes at a time (issue 20)
    tab.keyboard.press("p")
    tab.wait_for_function("() => window.__lanes.present")
    assert lanes(tab, "layout.turn") == {"from": 0, "count": 2, "total": 3}
    assert_presenter_fits(tab, 2)
    assert all(lane["kv"]["h"] >= 28 for lane in lanes(tab, "layout.lanes"))
    pill = tab.evaluate("() => window.__lanes.preemptions('continuous KV 224')[0].pill")
    assert share(rgb(palette["preempted"]), pixels(tab, pill), tolerance=12) > 0.5
    for lane in lanes(tab, "layout.lanes"):  # the dashed budget line runs along each bar's top
        top = pixels(tab, {"x": lane["kv"]["x"], "y": lane["kv"]["y"], "w": lane["kv"]["w"], "h": 2})
        assert share(rgb(palette["kvBudget"]), top, tolerance=40) > 0.3, lane["name"]
    assert context.problems == []


# --- keys, live, the editor's token count --------------------------------------------------------------------

def test_keys_c_and_v_switch_the_clock_and_the_rows_and_help_lists_every_key(context, tab, server):
    run_preset(tab, server, "mixed")
    to_end(tab)
    assert (lanes(tab, "clock"), lanes(tab, "view")) == ("steps", "slots")
    tab.keyboard.press("c")
    tab.wait_for_function("() => window.__lanes.clock === 'ms'")
    assert tab.is_checked("input[name=clock][value=ms]")
    tab.keyboard.press("v")
    tab.wait_for_function("() => window.__lanes.view === 'requests'")
    assert tab.is_checked("input[name=view][value=requests]")
    assert lanes(tab, "layout.lanes[0].rows") == 8  # a row per request
    tab.keyboard.press("c")
    tab.keyboard.press("v")
    tab.wait_for_function("() => window.__lanes.clock === 'steps' && window.__lanes.view === 'slots'")
    tab.keyboard.press("?")
    tab.wait_for_selector("#help", state="visible")
    keys = tab.eval_on_selector_all("#help dt", "dts => dts.map(d => d.textContent.trim())")
    assert {"c", "v", "p", "r", "[ ]", "?"} <= set(keys), keys
    assert in_viewport(box(tab, "#help"))
    tab.keyboard.press("Escape")
    tab.wait_for_selector("#help", state="hidden")
    assert context.problems == []


@pytest.fixture(scope="module")
def paced_server(browser, tmp_path_factory):
    """The simulator with each step taking its simulated time (`--pace 1`, 60 ms and up): a run that streams for
    seconds, which is all a playhead falling behind needs, without a model."""
    from tests.conftest import page_server
    with page_server(tmp_path_factory, "--backend", "sim", "--pace", "1") as url:
        yield url


def test_jump_to_live_appears_while_a_run_streams_and_the_playhead_is_behind(context, tab, paced_server):
    long_run = {"name": "long", "description": "two long answers", "slots": 2, "lanes": ["continuous"],
                "requests": [{"id": f"L{i}", "prompt": "Count slowly.", "max_new_tokens": 256, "ignore_eos": True}
                             for i in (1, 2)]}
    open_page(tab, mix_link(paced_server, long_run))
    tab.wait_for_function("() => window.__lanes.status === 'running' && window.__lanes.ticks >= 3", timeout=RUN_TIMEOUT_MS)
    tab.keyboard.press("Home")  # the playhead stops at the start, behind the newest step
    tab.wait_for_function("() => window.__lanes.playhead === 0 && !window.__lanes.playing")
    tab.wait_for_function("() => window.__lanes.status !== 'running' || !document.getElementById('btn-live').hidden")
    assert lanes(tab, "status") == "running", "the run ended before the page could fall behind it"
    assert tab.is_visible("#btn-live") and in_viewport(box(tab, "#btn-live"))
    tab.click("#btn-live")
    tab.wait_for_function("() => window.__lanes.playhead > 0 && window.__lanes.playing")
    wait_finished(tab, "long")
    tab.wait_for_selector("#btn-live", state="hidden")
    assert context.problems == []


def test_the_editor_counts_the_tokens_of_a_prompt_as_it_is_typed(context, tab, server):
    open_page(tab, server)
    tab.wait_for_selector("[data-field='requests[1].prompt']", state="attached")
    tab.click("#editor-details summary")
    prompt = "How many legs does a spider have, and why?"
    tab.fill("[data-field='requests[1].prompt']", prompt)
    count = "document.querySelector(\"[data-field='requests[1].prompt']\").parentElement.querySelector('.tok-count')"
    tab.wait_for_function(f"() => {{ const s = {count}; return s && / tok$/.test(s.textContent); }}")
    request = Request(f"{server}/api/tokens", data=json.dumps({"prompts": [prompt]}).encode(),
                      headers={"Content-Type": "application/json"})
    tokens = json.loads(urlopen(request).read())["tokens"][0]
    assert tab.evaluate(f"() => {count}.textContent") == f"{tokens} tok"
    # only the row that changed shows a count
    assert tab.eval_on_selector_all(".tok-count", "s => s.filter(n => n.textContent).length") == 1
    assert context.problems == []
