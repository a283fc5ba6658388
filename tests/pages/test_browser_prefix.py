"""The shared-instructions preset in headless Chromium against `python -m app` on the simulator (the real model for
tests marked model): the prefix cache's hits drawn as a light striped part of their P cells, its legend entry, its
metrics columns (the page's numbers equal to the server's), the lesson filled from the run. Waits on state the page
exposes, never a sleep."""
import json
from urllib.request import urlopen

import pytest

from tests.kit.browser import ARTIFACTS, pixels, rgb, share
from tests.kit.page import lanes, open_page, run_preset, to_end, wait_finished

pytestmark = pytest.mark.browser


def test_shared_instructions_draws_cached_prefills_and_counts_prompt_tokens(tab, server):
    open_page(tab, server)
    tab.click('button[data-preset="shared-instructions"]')
    wait_finished(tab)
    tab.keyboard.press("End")
    tab.wait_for_function("() => window.__lanes.shown === window.__lanes.limit && window.__lanes.limit > 0")
    assert lanes(tab, "metricsCheck") == "ok"  # metrics.js and engine/report/metrics.py agree, the new numbers too

    # 1) the numbers: the cached lane computed fewer prompt tokens, took the rest from the cache
    plain, cached = (lanes(tab, f"lanes[{n!r}].metrics") for n in ("continuous", "prefix cache"))
    assert plain["prompt_tokens_cached"] == 0 and cached["prompt_tokens_cached"] > 0
    assert cached["prompt_tokens_computed"] + cached["prompt_tokens_cached"] == plain["prompt_tokens_computed"]
    cell = tab.text_content('#metrics-table td[data-lane="prefix cache"][data-metric="prompt_tokens"]')
    assert cell == f"{cached['prompt_tokens_computed']} / {cached['prompt_tokens_cached']}"
    assert tab.text_content('#metrics-table td[data-lane="prefix cache"][data-metric="prefix_cache_hit_rate"]') == \
        f"{round(cached['prefix_cache_hit_rate'] * 100)}%"
    lesson = tab.text_content("#lesson")
    assert "\u2026" not in lesson and f"{cached['prompt_tokens_computed']} prompt tokens" in lesson

    # 2) the canvas: a hit's P cell is light and striped over its cached share, plain orange over the rest
    stored = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())
    step, row, hit = next((r["step"], i, c) for r in stored["records"]["prefix cache"]
                          for i, c in enumerate(r["slots"]) if c.get("cached"))
    rect = tab.evaluate(f"() => window.__lanes.cellRect('prefix cache', {step}, {row})")
    palette = lanes(tab, "palette")
    left = pixels(tab, {"x": rect["x"] + 3, "y": rect["y"] + 3, "w": 4, "h": rect["h"] - 6})
    assert 0.4 < share(rgb(palette["prefillCached"]), left) < 0.95  # the tint, with its stripes over it
    assert 0 < hit["cached"] < hit["prefill"][1]
    first = stored["records"]["prefix cache"][0]["slots"]  # Q1 computed its whole prompt: plain prefill
    row = next(i for i, c in enumerate(first) if c["state"] == "prefill")
    assert "cached" not in first[row]
    rect = tab.evaluate(f"() => window.__lanes.cellRect('prefix cache', 1, {row})")
    plain_left = pixels(tab, {"x": rect["x"] + 3, "y": rect["y"] + 3, "w": 4, "h": rect["h"] - 6})
    assert share(rgb(palette["prefill"]), plain_left) > 0.6 and share(rgb(palette["prefillCached"]), plain_left) == 0
    tab.keyboard.press("Home")
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")  # step 2: Q2 joins and hits the blocks Q1 computed in step 1
    tab.wait_for_function("() => window.__lanes.narration.startsWith('Step 2')")
    total = stored["records"]["prefix cache"][1]["slots"][1]["prefill"][1]
    assert f"Q2 takes {hit['cached']} of {total} prompt tokens from the prefix cache" in lanes(tab, "narration")
    legend = [i["label"] for i in lanes(tab, "legend")]
    assert "prefill from the prefix cache" in legend
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-prefix-cache.png"), full_page=True)
    assert tab.problems == []


def test_fleet_sessions_draws_each_replica_as_a_sub_lane_with_the_routers_marks(tab, server):
    """A fleet (data_parallel_size 2, docs/fleets.md): every replica drawn from its own records as a sub-lane on the
    shared clock, a routing mark at each arrival on the replica chosen (its branch in the tooltip), and the fleet's
    metrics, the four fleet numbers too, equal to the server's."""
    tab.set_viewport_size({"width": 1280, "height": 720})
    run_preset(tab, server, "fleet-sessions")
    to_end(tab)
    assert lanes(tab, "metricsCheck") == "ok"  # metrics.js's fleetMetrics and engine/report/fleet_metrics.py agree
    stored = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())
    drawn = [d["name"] for d in lanes(tab, "drawn")]
    assert drawn == ["round robin/0", "round robin/1", "cache-aware/0", "cache-aware/1"]
    for fleet in ("round robin", "cache-aware"):
        assert lanes(tab, f"lanes[{fleet!r}].replicas") == [f"{fleet}/0", f"{fleet}/1"]
        mine, theirs = lanes(tab, f"lanes[{fleet!r}].metrics"), stored["metrics"][fleet]
        for key in ("mean_load_imbalance", "max_load_imbalance", "prefix_hit_rate_available", "prefix_hit_rate_achieved",
                    "prefix_cache_hit_rate", "mean_ttft_ms"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-9), (fleet, key)
        cell = tab.text_content(f'#metrics-table td[data-lane="{fleet}"][data-metric="prefix_hits"]')
        assert cell == f"{mine['prefix_hit_rate_available']:.0%} / {mine['prefix_hit_rate_achieved']:.0%}"
        cell = tab.text_content(f'#metrics-table td[data-lane="{fleet}"][data-metric="load_imbalance"]')
        assert cell == f"{mine['mean_load_imbalance']:.2f} / {mine['max_load_imbalance']}"
        routes = {q["request"]: q for r in stored["records"][fleet] for q in r.get("routes", [])}
        assert len(routes) == len(stored["workload"]["requests"])
        for i in (0, 1):
            own = [r["replicas"][i] for r in stored["records"][fleet] if r["replicas"][i] is not None]
            assert lanes(tab, f"drawn[{drawn.index(f'{fleet}/{i}')}].steps") == len(own) > 0
            marks = tab.evaluate(f"() => window.__lanes.marks({f'{fleet}/{i}'!r})")
            assert sorted(m["id"] for m in marks) == sorted(k for k, q in routes.items() if q["replica"] == i)
            assert all(m["branch"] == routes[m["id"]]["branch"] and m["replica"] == i for m in marks)
            # the drawn cells are the replica's records: its first prefill cell where its own step 1 puts it
            cell = tab.evaluate(f"() => window.__lanes.findCell({f'{fleet}/{i}'!r}, 'prefill')")
            first = next((r["step"], k) for r in own for k, c in enumerate(r["slots"]) if c["state"] == "prefill")
            assert (cell["step"], cell["row"]) == first
    # a routing mark is drawn in its colour, and its tooltip names the replica and the branch
    mark = tab.evaluate("() => window.__lanes.marks('cache-aware/1')")[-1]
    palette = lanes(tab, "palette")
    assert share(rgb(palette["route"]), pixels(tab, {"x": mark["x"] - 1, "y": mark["y"] + 2, "w": 3, "h": 3})) > 0.3
    tab.evaluate(f"() => window.scrollTo(0, {lanes(tab, 'layout.canvas.top') + mark['y'] - 300})")
    box = tab.locator("#lanes").bounding_box()
    tab.mouse.move(box["x"] + mark["x"], box["y"] + mark["y"] + mark["h"] / 2)
    tab.wait_for_selector("#tooltip", state="visible")
    tip = tab.text_content("#tooltip")
    assert f"{mark['id']} arrives at" in tip and f"sent it to replica 2 ({mark['branch']})" in tip, tip
    lesson = tab.text_content("#lesson")
    assert "\u2026" not in lesson and "so it takes more of the hits on offer" in lesson
    ARTIFACTS.mkdir(exist_ok=True)
    tab.mouse.move(0, 0)
    tab.evaluate("() => window.scrollTo(0, document.querySelector('#lanes').getBoundingClientRect().top + window.scrollY - 20)")
    tab.screenshot(path=str(ARTIFACTS / "browser-fleet-sessions.png"))  # 1280 x 720: the four sub-lanes
    assert tab.problems == []


def test_fleet_herding_draws_each_replicas_load_band_and_the_guard_that_moves_the_herd(tab, server):
    """One hot prefix on cache_aware fleets (docs/fleets.md, fleet-herding): six sub-lanes, the routing marks on the
    replicas the router chose, each replica's load drawn as bars under its slots from its own records (the server's
    `replicas[i].load`), the herded replica's bars full height and its twin's empty, the legend naming the marks and
    the band, and the lesson's imbalances the server's."""
    tab.set_viewport_size({"width": 1280, "height": 720})
    run_preset(tab, server, "fleet-herding")
    to_end(tab)
    assert lanes(tab, "metricsCheck") == "ok"
    stored = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())
    fleets = ("guard 64", "guard 4", "round robin")
    assert [d["name"] for d in lanes(tab, "drawn")] == [f"{f}/{i}" for f in fleets for i in (0, 1)]
    for fleet in fleets:
        mine, theirs = lanes(tab, f"lanes[{fleet!r}].metrics"), stored["metrics"][fleet]
        for key in ("mean_load_imbalance", "max_load_imbalance", "mean_ttft_ms", "prefix_hit_rate_achieved"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-9), (fleet, key)
        routes = {q["request"]: q for r in stored["records"][fleet] for q in r.get("routes", [])}
        for i in (0, 1):
            marks = tab.evaluate(f"() => window.__lanes.marks({f'{fleet}/{i}'!r})")
            assert sorted(m["id"] for m in marks) == sorted(k for k, q in routes.items() if q["replica"] == i)
            bars = tab.evaluate(f"() => window.__lanes.loadBars({f'{fleet}/{i}'!r})")
            assert [b["load"] for b in bars] == [n for _, n in theirs["replicas"][i]["load"]], (fleet, i)
    herd, idle = (tab.evaluate(f"() => window.__lanes.loadBars('guard 64/{i}')") for i in (0, 1))
    assert max(b["load"] for b in herd) == 16 and all(b["load"] == 0 for b in idle)  # the herd: one replica holds all
    band = next(l for l in lanes(tab, "layout.lanes") if l["name"] == "guard 64/0")["load"]
    tallest = max(herd, key=lambda b: b["load"])
    assert tallest["h"] == band["h"] - 2 and tallest["y"] == band["y"] + 2
    palette = lanes(tab, "palette")
    x = tallest["x"] + max(0, tallest["w"] / 2 - 1)
    assert share(rgb(palette["load"]), pixels(tab, {"x": x, "y": tallest["y"] + 2, "w": 2, "h": tallest["h"] - 4})) > 0.8
    legend = [i["label"] for i in lanes(tab, "legend")]
    assert "routed: the router sent it here" in legend and "replica load: running + waiting" in legend
    assert "request arrives" not in legend  # every lane is a fleet: its arrivals are its routing marks
    # the requests table: a replica's own requests, their times its records' (the fleet's row lists them all)
    for lane, expect in (("guard 64/0", 16), ("guard 64/1", 0), ("guard 4/1", None)):
        tab.select_option("#request-lane", lane)
        tab.wait_for_function("(n) => document.querySelectorAll('#request-rows tr').length === n",
                              arg=expect if expect is not None else len(routes_of(stored, "guard 4", 1)))
    ids = routes_of(stored, "guard 4", 1)
    assert [tab.text_content(f"#request-rows tr:nth-child({k + 1}) th") for k in range(len(ids))] == ids
    q = stored["metrics"]["guard 4"]["requests"][ids[0]]
    ttft = tab.text_content("#request-rows tr:nth-child(1) td:nth-child(6)")  # TTFT steps / ms
    assert ttft == f"{q['ttft_steps']} / {round(q['ttft_ms'])}"
    # the memory map: one pool per replica that stepped (guard 64's second replica never did), at its last step
    tab.click("#btn-memory")
    tab.wait_for_function("() => window.__memmap && window.__memmap.lanes.length > 0")
    shown = tab.evaluate("() => window.__memmap.lanes.map((l) => [l.name, l.step])")
    steps = {d["name"]: d["steps"] for d in lanes(tab, "drawn")}
    assert shown == [[name, n] for name, n in steps.items() if n > 0]
    assert [name for name, _ in shown] == ["guard 64/0", "guard 4/0", "guard 4/1", "round robin/0", "round robin/1"]
    tab.click("#btn-memory")
    m = {f: stored["metrics"][f] for f in fleets}
    lesson = tab.text_content("#lesson")
    assert "\u2026" not in lesson and "so the guard keeps the load level" in lesson
    g64, g4 = m["guard 64"], m["guard 4"]
    assert f"imbalance {g64['mean_load_imbalance']:.2f} on average, {g64['max_load_imbalance']} at worst" in lesson
    assert f"{g4['mean_load_imbalance']:.2f}, {g4['max_load_imbalance']} at worst" in lesson
    ARTIFACTS.mkdir(exist_ok=True)
    tab.evaluate("() => window.scrollTo(0, document.querySelector('#lanes').getBoundingClientRect().top + window.scrollY - 20)")
    tab.screenshot(path=str(ARTIFACTS / "browser-fleet-herding.png"))  # 1280 x 720
    assert tab.problems == []


def routes_of(stored: dict, fleet: str, replica: int) -> list[str]:
    """The ids the router sent to one replica of a stored run's fleet, in the workload's order."""
    sent = {q["request"]: q["replica"] for r in stored["records"][fleet] for q in r.get("routes", [])}
    return [str(q["id"]) for q in stored["workload"]["requests"] if sent.get(str(q["id"])) == replica]
