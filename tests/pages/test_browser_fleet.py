"""The fleet view (scripts/fleet.py's page on PORT+200: app/live/fleet.py, app/live/fleet_app.py, static/js/live/fleet*.js)
against a real fleet: two `python -m app --backend sim --pace 1` servers behind the real vllm-router 0.1.17 with
round_robin, traffic sent through the router. The view's JSON holds both replicas' live lanes and the router's own
counters; the page draws both lanes (the requests sent while it watches) and the counters, per worker; a replica that stops answering (SIGSTOP: it still
accepts connections, so a reader without a timeout would hang) is shown down within the timeout while the other
stays up. Skipped where the router is not installed (`make router`). 11-26 s on the 2-core machine (load average 1-7),
most of it the two servers' start.
"""
import json
import os
import signal
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.live.fleet import TIMEOUT_S, FleetScrape
from app.live.fleet_app import serve
from scripts.fleet import ROOT, start_router, start_servers, stop, wait_for
from tests.kit.browser import ARTIFACTS, watched_context, watched_page
from tests.kit.server import free_port

pytestmark = [pytest.mark.browser]

ROUTER = ROOT / ".venv-router" / "bin" / "vllm-router"
REQUESTS = 6


@pytest.fixture(scope="module")
def fleet():
    if not ROUTER.exists():
        pytest.skip(f"vllm-router is not installed ({ROUTER}): `make router` installs it (0.1.17, into .venv-router)")
    port = free_port()
    urls, procs = start_servers(2, free_port(), "sim", args=("--pace", "1"))   # on the port given and the next
    view = None
    try:
        for url, proc in zip(urls, procs):
            wait_for(f"{url}/health", 120, proc)
        metrics_port = free_port()
        router = start_router(ROUTER, urls, "round_robin", port, metrics_port=metrics_port)
        procs.append(router)
        wait_for(f"http://127.0.0.1:{port}/health", 60, router)
        scrape = FleetScrape(urls, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}/metrics", "round_robin")
        view_port = free_port()
        view = serve(scrape, "127.0.0.1", view_port)
        yield {"urls": urls, "procs": procs, "router": f"http://127.0.0.1:{port}", "scrape": scrape,
               "view": f"http://127.0.0.1:{view_port}"}
    finally:
        if view is not None:
            view.shutdown()
        for proc in procs:   # a stopped replica must be continued before it can be terminated
            if proc.poll() is None:
                signal_all(proc, signal.SIGCONT)
        stop(procs)


def family(pid: int) -> list[int]:
    """A process and every process under it (a server is gunicorn's arbiter and its worker)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid] + [p for child in children for p in family(int(child))]


def signal_all(proc, sig: int) -> None:
    for pid in family(proc.pid):
        os.kill(pid, sig)


def complete(router: str, i: int) -> dict:
    body = {"prompt": f"Request {i}: name three rivers and one fact about each.", "max_tokens": 24}
    req = urllib.request.Request(f"{router}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def per_worker(snapshot: dict, name: str) -> dict[str, float]:
    return {s["labels"]["worker"]: s["value"] for s in snapshot["router"]["samples"] if s["name"] == name}


def test_the_view_reads_both_replicas_lanes_and_the_routers_counters_per_worker(fleet):
    with ThreadPoolExecutor(REQUESTS) as pool:
        answers = list(pool.map(lambda i: complete(fleet["router"], i), range(REQUESTS)))
    assert all(a["usage"]["completion_tokens"] == 24 for a in answers)
    snap = fleet["scrape"].snapshot()
    assert [r["up"] for r in snap["replicas"]] == [True, True] and snap["router"]["up"]
    served = [len(r["live"]["requests"]) for r in snap["replicas"]]
    assert served == [REQUESTS // 2, REQUESTS // 2]          # round robin over two
    assert [r["metrics"]["requests"] for r in snap["replicas"]] == served
    assert all(r["live"]["records"] for r in snap["replicas"])
    decisions = per_worker(snap, "vllm_router_policy_decisions_total")
    assert decisions == {url: REQUESTS // 2 for url in fleet["urls"]}
    assert per_worker(snap, "vllm_router_worker_health") == {url: 1 for url in fleet["urls"]}


def test_the_page_draws_both_lanes_and_the_counters_and_says_when_a_replica_stops_answering(fleet, browser):
    context = watched_context(browser, viewport={"width": 1280, "height": 720})
    page = watched_page(context)
    try:
        page.goto(fleet["view"])
        page.wait_for_function("() => window.__fleet && window.__fleet.polls >= 1", timeout=20_000)
        before = per_worker(fleet["scrape"].snapshot(), "vllm_router_policy_decisions_total")
        with ThreadPoolExecutor(REQUESTS) as pool:   # while the page watches: their bars are in its 30 s window
            list(pool.map(lambda i: complete(fleet["router"], i), range(REQUESTS)))
        want = {url: before.get(url, 0) + REQUESTS // 2 for url in fleet["urls"]}   # round robin: half each
        page.wait_for_function("(n) => window.__fleet.replicas.every((r, i) => r.up && r.runs.length > 0 "
                               "&& r.metrics && r.metrics.requests === n[i])", arg=list(want.values()), timeout=20_000)
        fv = page.evaluate("() => window.__fleet")
        assert [r["url"] for r in fv["replicas"]] == fleet["urls"]
        assert all({run["request"] for run in r["runs"]} <= set(r["requests"]) for r in fv["replicas"])
        lanes = page.locator("canvas[data-part=canvas]")
        boxes = [lanes.nth(i).bounding_box() for i in range(2)]
        assert boxes[0]["y"] == boxes[1]["y"] and boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"]  # side by side
        decisions = next(r for r in fv["router"]["perWorker"] if r["name"] == "policy_decisions_total")
        assert decisions["values"] == want
        row = page.locator("#worker-rows tr", has_text="policy_decisions_total")
        assert row.locator("td").all_text_contents()[1:] == [f"{want[url]:g}" for url in fleet["urls"]]
        assert page.locator("#worker-head th").all_text_contents()[1:] == ["replica 1", "replica 2"]
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "fleet-live.png"))

        signal_all(fleet["procs"][1], signal.SIGSTOP)   # accepts connections, answers nothing
        t = time.monotonic()
        snap = fleet["scrape"].snapshot()
        took = time.monotonic() - t
        assert took < 3 * TIMEOUT_S
        assert [r["up"] for r in snap["replicas"]] == [True, False]
        assert snap["replicas"][1]["error"] == "timed out"
        page.wait_for_function("() => window.__fleet.replicas[1] && !window.__fleet.replicas[1].up", timeout=10_000)
        line = page.locator(".replica[data-index='1'] [data-part=line]").text_content()
        assert line.startswith("not answering: timed out")
        assert page.locator("#fleet-status").text_content() == "1 of 2 replicas answering, 1 part down"
        assert page.evaluate("() => window.__fleet.replicas[0].up")
        assert page.evaluate("() => window.__csp") == [] and context.problems == []
    finally:
        signal_all(fleet["procs"][1], signal.SIGCONT)
        context.close()
