"""The P/D preset on the page (docs/disaggregation.md, pd-vs-colocated), on the simulator: the P/D lane drawn as its
prefill and decode engines on the shared clock, each hand-off's KV copy drawn in the decode engine's mark band
(its band and mark in their colour, its blocks, bytes and ms in the tooltip), the metrics and the P/D table equal
to the server's, each request's five TTFT parts in the requests table, and the lesson's claims said. Its call about 2 s on
the 2-core machine (load average 8-9), 10 s with the session's server and browser start."""
import json
from urllib.request import urlopen

import pytest

from tests.kit.browser import ARTIFACTS, pixels, rgb, share
from tests.kit.page import lanes, run_preset, to_end

pytestmark = pytest.mark.browser
PD = "P/D 1+1"


def test_pd_vs_colocated_draws_the_engines_and_each_kv_copy_and_its_metrics_are_the_servers(tab, server):
    tab.set_viewport_size({"width": 1280, "height": 720})
    run_preset(tab, server, "pd-vs-colocated")
    to_end(tab)
    assert lanes(tab, "metricsCheck") == "ok"  # core/pdmetrics.js and engine/report/pd_metrics.py agree
    stored = json.loads(urlopen(f"{server}/api/runs/{lanes(tab, 'runId')}").read())
    assert [d["name"] for d in lanes(tab, "drawn")] == ["continuous", "chunked 64", f"{PD}/prefill0", f"{PD}/decode0"]
    mine, theirs = lanes(tab, f"lanes[{PD!r}].metrics"), stored["metrics"][PD]
    for key in ("p50_itl_ms", "p99_itl_ms", "p50_ttft_ms", "mean_ttft_ms", "tokens", "steps"):
        assert mine[key] == pytest.approx(theirs[key], rel=1e-9), key
    for key, value in theirs["pd"].items():  # the copies and the five TTFT parts' means
        assert mine["pd"][key] == (value if isinstance(value, (list, str)) else pytest.approx(value, rel=1e-9)), key
    # each hand-off is a mark in the decode engine's band, where its copy ended, with the copy's band before it
    moved = {t["request"]: t for r in stored["records"][PD] for t in r["transfers"]}
    marks = tab.evaluate(f"() => window.__lanes.marks({PD + '/decode0'!r})")
    assert sorted(m["id"] for m in marks) == sorted(moved)
    for m in marks:
        t = moved[m["id"]]
        assert m["arrival_ms"] == pytest.approx(t["start_ms"] + t["ms"]) and m["transfer"]["bytes"] == t["bytes"]
    palette = lanes(tab, "palette")
    mark = max(marks, key=lambda m: m["transfer"]["blocks"])  # a long prompt's copy
    band = mark["band"]
    assert share(rgb(palette["transfer"]), pixels(tab, {"x": band["x"], "y": mark["y"] + mark["h"] - 2, "w": band["w"], "h": 2})) > 0.5
    tab.evaluate(f"() => window.scrollTo(0, {lanes(tab, 'layout.canvas.top') + mark['y'] - 300})")
    box = tab.locator("#lanes").bounding_box()
    tab.mouse.move(box["x"] + mark["x"], box["y"] + mark["y"] + mark["h"] / 2)
    tab.wait_for_selector("#tooltip", state="visible")
    tip = tab.text_content("#tooltip")
    t = moved[mark["id"]]
    assert f"{mark['id']}: {t['blocks']} KV blocks ({t['bytes'] / 1e6:.1f} MB)" in tip and f"copied in {t['ms']:.2f} ms" in tip, tip
    tab.mouse.move(0, 0)
    # the P/D table: every lane's ITL p99 beside the P/D lane's copies; the legend explains the copy
    p99 = {lane: tab.text_content(f'#pd-table td[data-lane="{lane}"][data-metric="p99_itl_ms"]') for lane in stored["metrics"]}
    assert p99 == {lane: str(int(m["p99_itl_ms"] + 0.5)) for lane, m in stored["metrics"].items()}  # JS rounds .5 up
    copied = tab.text_content(f'#pd-table td[data-lane="{PD}"][data-metric="pd.copied"]')
    assert copied.startswith(f"{theirs['pd']['blocks']} blk")
    assert "KV copied: prefill \u2192 decode engine" in [i["label"] for i in lanes(tab, "legend")]
    # the requests table of the P/D lane: each request's TTFT and its five parts
    tab.select_option("#request-lane", PD)
    tab.wait_for_selector("#request-rows tr .ttft-parts")
    parts = stored["metrics"][PD]["requests"]["L1"]["ttft_parts"]
    row = tab.locator('#request-rows tr[data-request="L1"] .ttft-parts').text_content()
    assert f"copy {parts['transfer']:.1f}" in row and str(round(parts["prefill"])) in row, row
    # the memory map: one pool per engine, the decode engine's holding the blocks copied into it
    tab.click("#btn-memory")
    tab.wait_for_function("() => window.__memmap && window.__memmap.lanes.length > 0")
    pools = tab.evaluate("() => window.__memmap.lanes.map((l) => l.name)")
    assert [f"{PD}/prefill0", f"{PD}/decode0"] == [p for p in pools if p.startswith(PD)], pools
    tab.click("#btn-memory")
    lesson = tab.text_content("#lesson")
    assert "\u2026" not in lesson and "so the decoders never stall" in lesson
    assert "but its first tokens come later, by the copy and the decode queue" in lesson
    ARTIFACTS.mkdir(exist_ok=True)
    tab.evaluate("() => window.scrollTo(0, document.querySelector('#lanes').getBoundingClientRect().top + window.scrollY - 20)")
    tab.screenshot(path=str(ARTIFACTS / "browser-pd-vs-colocated.png"))  # 1280 x 720
    assert tab.problems == []
