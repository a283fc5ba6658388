"""The page side of the metric table and the policy traits, in headless Chromium against `python -m app --backend sim`
(no model): the queue time column is the server's number, the CSV carries the queue times, and the editor offers and
loads every admission order the engine knows (shortest-job-first too: it used to load an unknown order as fcfs)."""
import base64
import json
import math
from pathlib import Path

import pytest

from tests.kit import ROOT

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page(browser, sim_server):
    tab = browser.new_page(viewport={"width": 1360, "height": 1000})
    tab.url_base = sim_server
    yield tab
    tab.close()


def open_page(tab, url: str) -> None:
    tab.goto(url)
    tab.wait_for_function("() => window.__lanes && window.__lanes.connected && window.__lanes.model.ready")
    tab.wait_for_selector("[data-field='lanes[0].name']", state="attached")


def mix_link(url: str, workload: dict) -> str:
    return f"{url}/#mix={base64.urlsafe_b64encode(json.dumps({'workload': workload}).encode()).decode().rstrip('=')}"


def test_queue_time_p95_on_the_page_is_the_servers_and_the_csv_carries_every_queue_figure(page):
    open_page(page, page.url_base)
    page.click('button[data-preset="sjf"]')
    page.wait_for_function("() => window.__lanes.status === 'finished' && window.__lanes.mix === 'sjf'", timeout=120_000)
    page.keyboard.press("End")
    page.wait_for_function("() => window.__lanes.shown === window.__lanes.limit")
    assert page.evaluate("() => window.__lanes.metricsCheck") == "ok"  # p95_queue_ms and the rest, number by number
    heads = page.eval_on_selector_all("#metrics-table thead th", "ths => ths.map((th) => th.textContent)")
    assert "p95 queue ms" in heads
    for lane in ("fcfs", "sjf"):
        m = page.evaluate(f"() => window.__lanes.lanes[{lane!r}].metrics")
        cell = page.text_content(f'#metrics-table td[data-lane="{lane}"][data-metric="p95_queue_ms"]')
        assert cell == str(math.floor(m["p95_queue_ms"] + 0.5)) and m["p95_queue_ms"] > 0  # the page rounds half up
    # the preset's lesson says both halves, with this run's numbers: sjf lowers the mean latency, R1 waits longest
    lesson = page.text_content("#lesson")
    fcfs, sjf = (page.evaluate(f"() => window.__lanes.lanes[{n!r}].metrics") for n in ("fcfs", "sjf"))
    assert f"({fcfs['mean_latency_steps']:.2f} to {sjf['mean_latency_steps']:.2f} steps)" in lesson
    assert sjf["mean_latency_steps"] < fcfs["mean_latency_steps"]
    queued = sjf["p99_queue_ms"]  # the lesson writes an integer as it is, else with 2 decimals (static/js/lanes/lesson.js)
    assert f"after {int(queued) if float(queued).is_integer() else f'{queued:.2f}'} ms in the queue" in lesson
    assert sjf["requests"]["R1"]["queue_ms"] == max(q["queue_ms"] for q in sjf["requests"].values())
    with page.expect_download() as download:
        page.click("#export-csv")
    head = Path(download.value.path()).read_text().splitlines()[0].split(",")
    assert {"mean_queue_ms", "p50_queue_ms", "p95_queue_ms", "p99_queue_ms"} <= set(head)


def test_the_editor_offers_and_loads_every_admission_order(page):
    workload = json.loads((ROOT / "demos" / "sjf.json").read_text())
    open_page(page, mix_link(page.url_base, {**workload, "scheduling_policy": "sjf"}))
    page.click("#editor-details summary")
    options = page.eval_on_selector("[data-field='scheduling_policy']", "s => [...s.options].map((o) => o.value)")
    assert options == ["fcfs", "priority", "sjf"]
    assert page.input_value("[data-field='scheduling_policy']") == "sjf"  # the mix's default order, not fcfs
    assert page.input_value("[data-field='lanes[1].scheduling_policy']") == "sjf"
    assert page.is_visible("[data-field='lanes[1].scheduling_policy']")
    page.select_option("[data-field='lanes[0].policy']", "dynamic")  # a dynamic lane: max wait, no scheduling
    assert page.is_visible("[data-field='lanes[0].max_wait']") and page.is_hidden("[data-field='lanes[0].scheduling_policy']")
