"""Driving the main page (`/`) in a Playwright page: open it, wait for a run to finish, read `window.__lanes` and
the metrics table, and check the projector layout (1280x720) presenter mode must fit. Every wait is on state the
page exposes, never a sleep. This module knows the page's test hooks and selectors, nothing of the server."""
import base64
import json
from urllib.request import urlopen

from tests.kit.browser import ROOT

RUN_TIMEOUT_MS = 300_000  # a run on the real model on a busy 2-core machine
MIXED = json.loads((ROOT / "demos" / "mixed.json").read_text())
W, H = 1280, 720  # the projector
# the playback controls a teacher uses, each of which must be on the projected screen
CONTROLS = ("#btn-start", "#btn-back", "#btn-play", "#btn-fwd", "#btn-end", "#scrub", "#readout", "#speed",
            "label:has(input[name='clock'][value='steps'])", "label:has(input[name='clock'][value='ms'])",
            "label:has(input[name='view'][value='slots'])", "label:has(input[name='view'][value='requests'])",
            "#btn-zoom-out", "#btn-zoom-in", "#btn-zoom-reset", "#btn-help", "#btn-present")


def lanes(page, expression: str):
    return page.evaluate(f"() => window.__lanes.{expression}")


def open_page(page, url: str, buttons: str = "visible") -> None:
    """Open the page and wait until it is connected, the model ready and the preset buttons `buttons`
    ("visible", or "attached" where presenter mode may hide them)."""
    page.goto(url)
    page.wait_for_function("() => window.__lanes && window.__lanes.connected && window.__lanes.model.ready")
    page.wait_for_selector("#preset-buttons button[data-preset]", state=buttons)


def open_projected(page, url: str) -> None:
    """`open_page` for the projector tests, whose presenter mode hides the preset buttons."""
    open_page(page, url, buttons="attached")


def wait_finished(page, name: str | None = None) -> None:
    """Wait until the run (the mix called `name`, if given) has finished; fail if it ended in an error."""
    page.wait_for_function("(name) => window.__lanes.status === 'error' || (window.__lanes.status === 'finished'"
                           " && (!name || window.__lanes.mix === name))", arg=name, timeout=RUN_TIMEOUT_MS)
    assert lanes(page, "status") == "finished", lanes(page, "error")


def metric(page, lane: str, key: str) -> str:
    return page.text_content(f'#metrics-table td[data-lane="{lane}"][data-metric="{key}"]')


def run_preset(page, server: str, name: str) -> None:
    open_projected(page, server)
    page.click(f'button[data-preset="{name}"]')
    wait_finished(page, name)


def to_end(page) -> None:
    page.keyboard.press("End")
    page.wait_for_function("() => window.__lanes.shown === window.__lanes.limit && !window.__lanes.playing")


def mix_link(server: str, workload: dict) -> str:
    mix = base64.urlsafe_b64encode(json.dumps({"workload": workload}).encode()).decode().rstrip("=")
    return f"{server}/#mix={mix}"


def stored(server: str, run_id: str) -> dict:
    return json.loads(urlopen(f"{server}/api/runs/{run_id}").read())


def box(page, selector: str) -> dict:
    return page.eval_on_selector(selector, "n => n.getBoundingClientRect().toJSON()")


def in_viewport(rect: dict) -> bool:
    return rect["left"] >= 0 and rect["top"] >= 0 and rect["right"] <= W + 0.5 and rect["bottom"] <= H + 0.5 \
        and rect["width"] > 0 and rect["height"] > 0


def canvas_rect(page, rect: dict) -> dict:
    """A layout rectangle (canvas CSS px) in viewport coordinates."""
    c = box(page, "#lanes")
    return {"left": c["left"] + rect["x"], "top": c["top"] + rect["y"], "right": c["left"] + rect["x"] + rect["w"],
            "bottom": c["top"] + rect["y"] + rect["h"], "width": rect["w"], "height": rect["h"]}


def assert_presenter_fits(page, lane_count: int) -> None:
    """Every lane grid, the narration and every playback control inside the 1280x720 viewport, nothing scrolled."""
    assert page.evaluate("() => [scrollX, scrollY]") == [0, 0]
    assert page.evaluate("() => document.documentElement.scrollHeight") <= H  # nothing below the fold
    layout = lanes(page, "layout")
    assert len(layout["lanes"]) == lane_count
    for lane in layout["lanes"]:
        for part in ("grid", "kv"):
            assert in_viewport(canvas_rect(page, lane[part])), (lane["name"], part, canvas_rect(page, lane[part]))
    assert in_viewport(box(page, "#narration")), box(page, "#narration")
    for selector in CONTROLS:
        assert page.is_visible(selector), selector
        assert in_viewport(box(page, selector)), (selector, box(page, selector))
    for selector in ("#editor-details", "#metrics-table", "#request-rows", "#preset-buttons", ".top"):
        assert page.is_hidden(selector), selector  # editor, metrics, requests and preset buttons give way
