"""The memory map and the swapped state in headless Chromium at a projector's 1280x720, against `python -m app` on
the simulator (the real model for the test marked model): the swap-vs-recompute preset's swap lane at the step it
swaps a request out draws the swapped cell, its legend entry and its narration; the memory map (the m key) then shows
that lane's blocks, the swapped request in the host pool, block usage and token usage side by side, and fits the
screen in presenter mode; at the end the table and the caption count the swap-out as an eviction; paged-vs-reserve on the real model shows the paged lane holding more requests' blocks.
Every wait is on state the page exposes (window.__lanes, window.__memmap), never a sleep."""
import json
from urllib.request import urlopen

import pytest

from tests.kit.browser import ARTIFACTS, pixels, rgb, share
from tests.kit.page import H, W, box, in_viewport, lanes, open_projected, to_end, wait_finished

pytestmark = pytest.mark.browser

BROWSER_CONTEXT = {"viewport": {"width": W, "height": H}}  # conftest.py's `context` fixture reads it


def memmap(tab, expression: str):
    return tab.evaluate(f"() => window.__memmap.{expression}")


def go_to_step(tab, step: int) -> None:
    """The playhead at the end of `step` on the steps clock."""
    tab.click("label:has(input[name='clock'][value='steps'])")
    tab.wait_for_function("() => window.__lanes.clock === 'steps'")
    tab.keyboard.press("Home")
    for _ in range(step):
        tab.keyboard.press("ArrowRight")
    tab.wait_for_function("(s) => window.__lanes.playhead === s && !window.__lanes.playing", arg=step)


def run(tab, server: str, preset: str) -> dict:
    open_projected(tab, server)
    tab.click(f'button[data-preset="{preset}"]')
    wait_finished(tab, preset)
    assert lanes(tab, "metricsCheck") == "ok"  # token_utilization too: metrics.js and engine/report/metrics.py agree
    return json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())


def test_a_swap_is_drawn_narrated_and_the_memory_map_shows_the_host_pool_and_both_usages(tab, server):
    stored = run(tab, server, "swap-vs-recompute")
    records = stored["records"]["swap"]
    out = next(r for r in records if any(n > 0 for n in r.get("kv_swapped", {}).values()))
    victim = next(rid for rid, n in out["kv_swapped"].items() if n > 0)
    assert any(c["state"] == "swapped" and c["request"] == victim for c in out["slots"])

    # 1) the lanes: the swapped cell, its legend entry, its flag and the narration of that step
    go_to_step(tab, out["step"])
    assert f"{victim} swapped out to the host pool" in lanes(tab, "narration")
    assert "swapped out: KV to the host pool" in [i["label"] for i in lanes(tab, "legend")]
    assert f"\u21c4 {victim} swapped out" in [t["text"] for t in lanes(tab, "labels") if t["kind"] == "flag"]
    palette = lanes(tab, "palette")
    slot = next(i for i, c in enumerate(out["slots"]) if c["request"] == victim)
    rect = tab.evaluate(f"() => window.__lanes.cellRect('swap', {out['step']}, {slot})")
    assert share(rgb(palette["swapped"]), pixels(tab, {"x": rect["x"] + 2, "y": rect["y"] + 2, "w": 4, "h": 4})) > 0.6

    # 2) the memory map at that step: the victim's blocks in the host pool, none of its blocks on the device
    tab.keyboard.press("m")
    tab.wait_for_function("() => window.__memmap && !document.getElementById('memmap').hidden")
    assert tab.is_hidden("#lanes") and tab.get_attribute("#btn-memory", "aria-pressed") == "true"
    swap = next(l for l in memmap(tab, "lanes") if l["name"] == "swap")
    assert swap["step"] == out["step"] and swap["swapped"] == [{"id": victim, "blocks": out["kv_swapped"][victim]}]
    assert victim not in out.get("kv_tokens", {})
    tables = tables_at(records, out["step"])
    assert swap["held"] == len({b for rid in out.get("kv_tokens", {}) for b in tables[rid]})
    assert swap["held"] + swap["free"] + swap["cached"] == swap["numBlocks"] == 14
    texts = [t["text"] for t in memmap(tab, "labels")]
    pct = lambda v: f"{round(v * 100)}%"  # noqa: E731
    figures = [t for t in texts if t.startswith("blocks in use") or t.startswith("tokens ")]
    # the free blocks a paged lane keeps back, one per running request (issue 38: "7 KV blocks short" with 2 free)
    assert swap["kept"] == min(swap["free"], len(out.get("kv_tokens", {})))
    kept = f" \u00b7 {swap['free']} free, {swap['kept']} kept back (1 per running request)" if swap["kept"] else ""
    assert f"blocks in use {swap['held']} / 14 ({pct(swap['blockUsage'])}){kept}" in figures
    assert any(t.startswith(f"tokens {swap['tokens']} / 224 slots ({pct(swap['tokenUsage'])})") for t in figures)
    assert f"\u21c4 {victim} \u00b7 {out['kv_swapped'][victim]} blocks" in texts
    assert swap["tokens"] == sum(out["kv_tokens"].values())  # nothing shared in this mix: each token once
    # the pool in a production model's bytes under the map (core/scale.js): 224 positions x 45 KiB = 10.3 MB
    scale = tab.text_content("#memmap-scale")
    assert tab.is_visible("#memmap-scale") and scale.startswith("At scale: this pool's 224 tokens take 10.3 MB of K/V")
    assert "Llama-3.1-8B in bf16 takes 128 KiB a token" in scale
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "browser-memmap-swap.png"))

    # 3) presenter mode: the map fits the projector's screen with the playback controls
    tab.keyboard.press("p")
    tab.wait_for_function("() => document.body.dataset.present === 'true'")
    tab.wait_for_function("() => window.__memmap.height <= innerHeight")
    assert in_viewport(box(tab, "#memmap")), box(tab, "#memmap")
    assert in_viewport(box(tab, "#btn-play")) and in_viewport(box(tab, "#btn-memory"))
    assert min(t["px"] for t in memmap(tab, "labels") if t["kind"] in ("figure", "title")) >= 18
    tab.screenshot(path=str(ARTIFACTS / "browser-memmap-present.png"))
    tab.keyboard.press("m")  # back to the lanes
    tab.wait_for_function("() => document.getElementById('memmap').hidden && !document.getElementById('lanes').hidden")
    assert tab.is_hidden("#memmap-scale")

    # 4) at the end, the swap-out counts as an eviction: the table's preempted and swapped out, the lane's caption
    tab.keyboard.press("p")
    to_end(tab)
    cell = lambda lane, metric: tab.text_content(  # noqa: E731
        f'#metrics-table td[data-lane="{lane}"][data-metric="{metric}"]')
    assert [cell(lane, key) for lane in ("recompute", "swap") for key in ("preemptions", "swaps")] == ["1", "0", "1", "1"]
    assert lanes(tab, "lanes.swap.caption").endswith("1 preempted (1 swapped out)")
    assert tab.problems == []


def tables_at(records: list[dict], step: int) -> dict:
    """Every request's device block table after `step`, replayed from the records' deltas."""
    tables: dict = {}
    for r in records[:step]:
        for rid in r.get("kv_dropped", ()):
            tables.pop(rid, None)
        tables.update(r.get("kv_tables", {}))
    return tables


@pytest.mark.model
def test_paged_holds_more_requests_blocks_than_reserve_on_the_real_model(tab, server):
    stored = run(tab, server, "paged-vs-reserve")
    to_end(tab)  # the metrics table shows the numbers at the playhead: the run's own at its end
    paged, reserve = (lanes(tab, f"lanes[{n!r}].metrics") for n in ("paged", "reserve"))
    assert paged["token_utilization"] > reserve["token_utilization"]
    cell = tab.text_content('#metrics-table td[data-lane="paged"][data-metric="token_utilization"]')
    assert cell == f"{round(paged['token_utilization'] * 100)}%"
    busiest = max(stored["records"]["paged"], key=lambda r: len(r.get("kv_tokens", {})))
    go_to_step(tab, busiest["step"])
    tab.keyboard.press("m")
    tab.wait_for_function("() => window.__memmap && window.__memmap.lanes.length === 2")
    shown = {l["name"]: l for l in memmap(tab, "lanes")}
    owners = {rid for rid in busiest["kv_tokens"]}
    assert len(owners) > max(len(r.get("kv_tokens", {})) for r in stored["records"]["reserve"])
    assert shown["paged"]["tokens"] == sum(busiest["kv_tokens"].values())
    lesson = tab.text_content("#lesson")
    assert f"tokens in {round(paged['token_utilization'] * 100)}%" in lesson and "20.4-38.2%" in lesson
    ARTIFACTS.mkdir(exist_ok=True)
    tab.locator("#memmap").screenshot(path=str(ARTIFACTS / "browser-memmap-paged-real.png"))
    assert tab.problems == []
