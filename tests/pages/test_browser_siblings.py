"""A request's n samples on the page (Chromium, the simulator): a shared link with `n` runs through the editor as
siblings R3·1 ... R3·3, the requests table says the prompt once, a sibling's cell tooltip says "sample k of 3 of R3",
the page's metrics equal the server's, and the editor shows the request as written (n 3, one row)."""
import pytest

from tests.kit.page import lanes, mix_link, open_page, to_end, wait_finished

pytestmark = pytest.mark.browser

WORKLOAD = {"name": "samples", "slots": 4, "lanes": ["static", "continuous"],
            "requests": [{"id": "R3", "prompt": "Tell me a fact.", "max_new_tokens": 4, "n": 3},
                         {"id": "R1", "prompt": "Say hi.", "max_new_tokens": 3}]}


def test_a_request_of_three_samples_is_drawn_as_its_siblings(tab, server):
    open_page(tab, mix_link(server, WORKLOAD))
    wait_finished(tab, "samples")
    to_end(tab)
    assert lanes(tab, "metricsCheck") == "ok"
    rows = tab.locator("#request-rows tr")
    assert [rows.nth(i).locator("th").text_content() for i in range(rows.count())] == ["R3·1", "R3·2", "R3·3", "R1"]
    assert rows.nth(0).locator("td.prompt").text_content() == "Tell me a fact."
    assert rows.nth(1).locator("td.prompt").text_content() == "(the prompt of R3: sample 2 of 3)"
    tab.locator("#lanes").scroll_into_view_if_needed()
    box = tab.locator("#lanes").bounding_box()
    cell = tab.evaluate("() => window.__lanes.findCell('continuous', 'prefill')")  # slot 1, step 1: R3·1
    tab.mouse.move(box["x"] + cell["x"] + cell["w"] / 2, box["y"] + cell["y"] + cell["h"] / 2)
    tab.wait_for_selector("#tooltip", state="visible")
    tip = tab.text_content("#tooltip")
    assert "R3·1" in tip and "sample 1 of 3 of R3" in tip, tip
    tab.click("#editor-details summary")
    assert tab.input_value("[data-field='requests[0].n']") == "3"
    assert tab.input_value("[data-field='requests[0].id']") == "R3"
    assert tab.locator("table.mix tbody tr").count() == 2
    assert tab.problems == []
