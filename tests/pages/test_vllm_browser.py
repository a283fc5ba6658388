"""The vLLM lane on the page, in headless Chromium against `python -m app` on the real model: the editor offers it
(the server says vLLM is installed), a run puts our continuous lane and the vLLM lane on one clock, the page says
vLLM is starting before step 1, and the vLLM lane's cells are drawn from its own records, its metrics computed from
them like any lane's (the page's figures equal the server's). Starts vLLM once (~60 s, minutes on a busy machine)."""
import pytest

from engine.peers.vllm_process import vllm_available
from tests.kit.browser import rgb, pixels, share
from tests.kit.page import lanes, open_page, stored

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.vllm]
VLLM_START_MS = 900_000  # vLLM's start (compiling its model) on a busy 2-core machine, then the run


@pytest.fixture(autouse=True)
def _needs_vllm():
    if not vllm_available():
        pytest.skip("the vLLM lane's virtualenv (.venv-vllm) is missing: run `make vllm`")


def test_continuous_and_the_vllm_lane_on_one_clock_drawn_from_the_vllm_records(tab, server):
    open_page(tab, server)
    assert lanes(tab, "model.vllm") is True
    tab.click("#editor-details summary")
    assert tab.is_hidden("#vllm-hint")
    tab.select_option("[data-field='lanes[0].policy']", "vllm")  # the default lanes: static -> vLLM, continuous
    tab.fill("[data-field='lanes[0].name']", "vLLM")
    assert tab.is_hidden("[data-field='lanes[0].scheduling_policy']")  # an option vLLM cannot take is not offered
    tab.click("#run-mix")
    tab.wait_for_function("() => document.querySelector('#run-status').textContent.includes('starting vLLM')",
                          timeout=120_000)
    tab.wait_for_function("() => window.__lanes.status === 'error' || window.__lanes.status === 'finished'",
                          timeout=VLLM_START_MS)
    assert lanes(tab, "status") == "finished", lanes(tab, "error")
    assert lanes(tab, "metricsCheck") == "ok"  # the page's metrics of every lane equal the server's
    assert sorted(lanes(tab, "order")) == ["continuous", "vLLM"]
    run = stored(server, lanes(tab, "runId"))
    records = run["records"]["vLLM"]
    drawn = lanes(tab, "lanes['vLLM']")
    assert drawn["steps"] == len(records) and drawn["policy"] == "continuous"
    assert drawn["ends"][-1] == pytest.approx(records[-1]["start_ms"] + records[-1]["ms"], abs=1e-3)
    assert drawn["metrics"]["tokens"] == run["metrics"]["vLLM"]["tokens"]
    assert run["metrics"]["vLLM"]["tokens"] == run["metrics"]["continuous"]["tokens"]
    # the first step's cells are where the vLLM lane's first record puts them, in its cell colours
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    palette = lanes(tab, "palette")
    first = records[0]
    for row, cell in enumerate(first["slots"]):
        if cell["state"] != "prefill":
            continue
        rect = tab.evaluate(f"() => window.__lanes.cellRect('vLLM', 1, {row})")
        inset = {"x": rect["x"] + 2, "y": rect["y"] + 2, "w": max(rect["w"] - 4, 1), "h": max(rect["h"] - 4, 1)}
        assert share(rgb(palette["prefill"]), pixels(tab, inset), tolerance=40) > 0.2, (row, cell)
    assert tab.problems == []
