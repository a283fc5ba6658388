"""The main page's smaller bugs of issue 20, in headless Chromium at a projector's 1280x720 against `python -m app` on
the simulator: a preset opens on the clock its lesson speaks in; every column of the metrics table is on screen or
in a scroll box that says it scrolls; quick preset clicks leave the highlighted preset, the canvas and the message
in agreement. Each wait is on state the page exposes (`window.__lanes`, the DOM), never a sleep.
"""
import pytest

from tests.kit.page import H, W, lanes, wait_finished
from tests.kit.page import open_page

pytestmark = pytest.mark.browser

BROWSER_CONTEXT = {"viewport": {"width": W, "height": H}}


def choose(page, name: str) -> None:
    page.click(f'#preset-buttons button[data-preset="{name}"]')
    wait_finished(page, name)


def test_each_preset_opens_on_the_clock_its_lesson_speaks_in_and_the_user_may_switch_after(context, tab, server):
    open_page(tab, server)
    choose(tab, "mixed")
    assert lanes(tab, "clock") == "steps"
    choose(tab, "long-prompt")  # its lesson: "(milliseconds clock)"
    assert lanes(tab, "clock") == "ms"
    choose(tab, "arrivals")
    assert lanes(tab, "clock") == "ms"
    choose(tab, "priorities")  # "arrives at step 2"
    assert lanes(tab, "clock") == "steps"
    tab.keyboard.press("c")  # the user may still switch
    tab.wait_for_function("() => window.__lanes.clock === 'ms'")
    assert tab.is_checked("input[name='clock'][value='ms']")
    open_page(tab, f"{server}/#preset=long-prompt")  # a link to a preset runs it on its clock too
    wait_finished(tab, "long-prompt")
    assert lanes(tab, "clock") == "ms"
    assert context.problems == []


def columns_out_of_sight(page) -> list[str]:
    """The metrics table's headers that are neither in sight (inside the viewport and its scroll box) nor reachable
    with a visible cue: their scroll box scrolls and says so (data-overflow and the note under it)."""
    return page.evaluate("""() => {
      const table = document.querySelector('#metrics-table');
      const box = table.parentElement;
      const scrolls = box.scrollWidth > box.clientWidth && getComputedStyle(box).overflowX !== 'visible';
      const cue = box.nextElementSibling;
      const cued = scrolls && box.dataset.overflow && box.dataset.overflow !== 'none' && cue
        && cue.classList.contains('scroll-cue') && !cue.hidden && cue.getBoundingClientRect().height > 0
        && /scroll/.test(cue.textContent);
      return [...table.querySelectorAll('thead th')].filter((th) => {
        const r = th.getBoundingClientRect();
        const clip = box.getBoundingClientRect();  // inside the viewport and not clipped by its scroll box
        const seen = r.width > 0 && r.left >= Math.max(0, clip.left) - 0.5 && r.right <= Math.min(innerWidth, clip.right) + 0.5;
        return !seen && !cued;
      }).map((th) => th.textContent.trim());
    }""")


@pytest.mark.parametrize("width,height,preset", [(1280, 720, "memory-pressure"), (1440, 900, "shared-instructions")])
def test_every_metrics_column_is_on_screen_or_in_a_scroll_box_that_says_it_scrolls(context, tab, server, width, height,
                                                                                    preset):
    tab.set_viewport_size({"width": width, "height": height})
    open_page(tab, server)
    choose(tab, preset)
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    headers = tab.eval_on_selector_all("#metrics-table thead th", "ths => ths.map((th) => th.textContent.trim())")
    assert "preempted" in headers and "padding cells" in headers
    assert columns_out_of_sight(tab) == []
    box = "#metrics-table"
    tab.eval_on_selector(box, "t => { t.parentElement.scrollLeft = t.parentElement.scrollWidth; }")  # scrolled to the end
    tab.wait_for_function("() => ['left', 'none'].includes(document.querySelector('#metrics-table').parentElement.dataset.overflow)")
    last = tab.eval_on_selector("#metrics-table thead th:last-child", "th => th.getBoundingClientRect().toJSON()")
    clip = tab.eval_on_selector("#metrics-table", "t => t.parentElement.getBoundingClientRect().toJSON()")
    assert last["right"] <= min(width, clip["right"]) + 0.5  # the last column can be brought into view
    assert context.problems == []


def test_a_refused_submit_names_what_it_refused_and_the_highlight_follows_the_lanes(context, tab, server):
    """More preset clicks than the server takes in a minute (10 submits per client): the refused one is named, and
    the highlighted preset, the lesson and the lanes agree on what is shown (issue 20: "too many submits" with
    `mixed` highlighted over a cancelled run of `same`)."""
    open_page(tab, server)
    names = ["same", "mixed"]
    for i in range(11):  # each click waits for its run to start (or for the refusal), so every click is one submit
        name = names[i % 2]
        before = lanes(tab, "runId")
        tab.click(f'#preset-buttons button[data-preset="{name}"]')
        tab.wait_for_function("([before, name]) => window.__lanes.error || (window.__lanes.runId !== before"
                              " && window.__lanes.mix === name && window.__lanes.status !== 'submitting')",
                              arg=[before, name])
        if lanes(tab, "error"):
            break
    error = lanes(tab, "error")
    assert error and error["code"] == "rate_limited", error
    refused, shown = name, lanes(tab, "mix")
    assert shown != refused
    line = tab.inner_text("#run-status")
    assert "too many submits" in line and f"\u201c{refused}\u201d did not start" in line and f"\u201c{shown}\u201d" in line
    pressed = tab.eval_on_selector_all('#preset-buttons button[aria-pressed="true"]', "bs => bs.map((b) => b.dataset.preset)")
    assert pressed == [shown]  # the highlight is what the lanes show
    presets = tab.evaluate("async () => (await (await fetch('/api/presets')).json()).presets")
    description = next(p["description"] for p in presets if p["name"] == shown)
    assert tab.inner_text("#lesson")[:40] == description[:40]  # and so is the lesson
    assert context.problems == []
