"""The pipeline-bubbles preset's PP=2 m=4 lane on the page (docs/parallelism.md), on the session's real-model server
(one lane and short requests, so the test pays for one pair of SmolLM2 stage processes): under the lanes, the lane's
stage x time grid for the step at the playhead, one bar per micro-batch per stage where the records put it, the idle
time grey between, and the measured bubble beside the formula as the records say. The preset's claims:
tests/js/lanes/pplesson.test.mjs; the bubbles' figures: docs/parallelism.md."""
import json

import pytest

from tests.kit.browser import ARTIFACTS, ROOT, rgb, share
from tests.kit.page import lanes, mix_link, open_page, stored, to_end, wait_finished

pytestmark = [pytest.mark.browser, pytest.mark.model]
LANES = ["PP=2 m=4"]


def grid_pixels(tab, rect: dict) -> list[tuple]:
    """The #pipeline canvas's device pixels in a rectangle of CSS px, as (r, g, b)."""
    data = tab.evaluate("""(r) => {
        const c = document.getElementById('pipeline'), d = window.devicePixelRatio;
        return Array.from(c.getContext('2d').getImageData(Math.round(r.x * d), Math.round(r.y * d),
            Math.max(1, Math.round(r.w * d)), Math.max(1, Math.round(r.h * d))).data);
    }""", rect)
    return [tuple(data[i:i + 3]) for i in range(0, len(data), 4)]


def test_pipeline_bubbles_draws_each_stage_grid_where_its_records_put_it(tab, server):
    preset = json.loads((ROOT / "demos" / "pipeline-bubbles.json").read_text())
    workload = {**preset, "name": "pp", "claims": [], "lanes": [l for l in preset["lanes"] if l != "continuous"
                                                                and l["name"] in LANES],
                "requests": [{**r, "max_new_tokens": 3} for r in preset["requests"]]}
    open_page(tab, mix_link(server, workload))
    wait_finished(tab, "pp")
    to_end(tab)
    records = stored(server, lanes(tab, "runId"))["records"]
    drawn = tab.evaluate("() => window.__pipeline")
    tab.locator("#pipeline").screenshot(path=str(ARTIFACTS / "pipeline.png"))
    assert [d["name"] for d in drawn["lanes"]] == LANES and tab.is_visible("#pipeline")
    for d in drawn["lanes"]:
        rec = next(r for r in reversed(records[d["name"]]) if r.get("stage_grid"))  # the last step through the stages
        assert d["step"] == rec["step"] and d["fraction"] == rec["bubble_fraction"]
        assert f"bubble measured {round(rec['bubble_fraction'] * 100)}%" in d["text"]
        assert f"= {round(rec['bubble_formula'] * 100)}%" in d["text"]
        assert [(b["stage"], b["call"], b["mb"]) for b in d["bars"]] == \
            [(s, c, mb) for s, stage in enumerate(rec["stage_grid"]) for c, mb, _, _ in stage]
        spans = [s for stage in rec["stage_grid"] for s in stage]
        first = min(s[2] for s in spans)  # the row spans the measured fraction's time: first start to last end
        scale = d["idle"][0]["w"] / (max(s[3] for s in spans) - first)
        for b, (_, _, start, end) in zip(d["bars"], spans):
            assert b["x"] == pytest.approx(d["idle"][0]["x"] + (start - first) * scale, abs=0.01)
            assert b["w"] == pytest.approx(max(1, (end - start) * scale), abs=0.01)
        # stage 1 waits for stage 0's first micro-batch: its row is grey (idle) before its first bar
        first, row = d["bars"][0], d["idle"][1]
        waiting = {"x": row["x"] + 1, "y": row["y"] + 4, "w": max(1, first["x"] + first["w"] - row["x"] - 2), "h": 8}
        assert share(rgb("#e3e6ea"), grid_pixels(tab, waiting)) > 0.9
        bar = d["bars"][0]
        assert share(rgb("#e3e6ea"), grid_pixels(tab, {"x": bar["x"] + bar["w"] / 2, "y": bar["y"] + 9, "w": 1, "h": 1})) == 0
    assert any(len(b) == 4 for b in [[x for x in d["bars"] if x["stage"] == 0] for d in drawn["lanes"]])  # m = 4
