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
    assert context.problems == []
