"""A tensor-parallel lane on the page (docs/parallelism.md), on the real model: SmolLM2-135M split over 3 rank
processes writes two short requests, and the page draws a bar per step under the lane's cells, split into compute and
all-reduce at the server's numbers (the bars' ms and widths from the stored records), the tooltip on a step gives the
split and each of the 30 layers' compute + all-reduce, the line under the lane's title says where the ranks ran (the
run's `placement`), and the legend explains both colours."""
import pytest

from tests.kit.browser import ARTIFACTS, pixels, rgb, share
from tests.kit.page import lanes, mix_link, stored, to_end, wait_finished

pytestmark = [pytest.mark.browser, pytest.mark.model]
TP = "TP=3"
MIX = {"name": "tp-two", "clock": "ms", "slots": 2, "lanes": [{"name": TP, "policy": "continuous", "tensor_parallel_size": 3}],
       "requests": [{"id": "R2", "prompt": "Say hi.", "max_new_tokens": 2, "ignore_eos": True, "arrival": 0},
                    {"id": "R4", "prompt": "What is 2 + 2?", "max_new_tokens": 2, "ignore_eos": True, "arrival": 0}]}


def test_a_tp_lane_draws_each_steps_compute_and_all_reduce_at_the_servers_numbers(tab, server):
    tab.goto(mix_link(server, MIX))  # a link's mix runs by itself
    wait_finished(tab, "tp-two")
    to_end(tab)
    assert lanes(tab, "status") == "finished", lanes(tab, "error")
    run = stored(server, lanes(tab, "runId"))
    recs = run["records"][TP]
    bars = lanes(tab, f"splitBars({TP!r})")
    split = [i + 1 for i, r in enumerate(recs) if "allreduce_ms" in r]
    assert split and sorted({b["step"] for b in bars}) == split
    for step in split:  # each step's two bars: the record's ms, in proportion to the step's span on the shared clock
        r = recs[step - 1]
        compute, reduce = (next(b for b in bars if b["step"] == step and b["kind"] == k) for k in ("compute", "allreduce"))
        assert compute["ms"] == r["compute_ms"] and reduce["ms"] == r["allreduce_ms"]
        assert reduce["x"] == pytest.approx(compute["x"] + compute["w"])
        assert compute["w"] / reduce["w"] == pytest.approx(r["compute_ms"] / r["allreduce_ms"], rel=1e-6)
        assert len(r["layer_ms"]) == 30 and r["allreduces"] == 60 * (2 if r["forward"] == "split" else 1)
    palette = lanes(tab, "palette")
    widest = max((b for b in bars if b["kind"] == "allreduce"), key=lambda b: b["w"])
    band = {"x": widest["x"] + 1, "y": widest["y"] + 2, "w": max(1, widest["w"] - 2), "h": widest["h"] - 4}
    assert share(rgb(palette["allreduce"]), pixels(tab, band)) > 0.8
    # the tooltip of that step: its split and every layer's, at the record's numbers
    r = recs[widest["step"] - 1]
    tab.evaluate(f"() => window.scrollTo(0, {lanes(tab, 'layout.canvas.top') + widest['y'] - 300})")
    box = tab.locator("#lanes").bounding_box()
    tab.mouse.move(box["x"] + widest["x"] + widest["w"] / 2, box["y"] + widest["y"] + widest["h"] / 2)
    tab.wait_for_selector("#tooltip", state="visible")
    tip = tab.text_content("#tooltip")
    assert f"compute {r['compute_ms']:.1f} ms \u00b7 all-reduce {r['allreduce_ms']:.1f} ms" in tip, tip
    c, a = r["layer_ms"][29]
    assert f"L29 {c:.1f}+{a:.1f}" in tip, tip
    tab.mouse.move(0, 0)
    # where the ranks ran: the run's placement, said under the lane's title and kept in its metrics
    placement = recs[0]["placement"]
    assert run["metrics"][TP]["placement"] == placement
    assert [p["role"] for p in placement["processes"]] == ["driver", "tp rank 0", "tp rank 1", "tp rank 2"]
    drawn = [label["text"] for label in lanes(tab, "labels") if label["kind"] == "title"]
    assert any(text.startswith(placement["says"]) for text in drawn), drawn
    assert {"TP step: compute on a shard", "TP step: all-reduce"} <= {i["label"] for i in lanes(tab, "legend")}
    ARTIFACTS.mkdir(exist_ok=True)
    tab.evaluate("() => window.scrollTo(0, document.querySelector('#lanes').getBoundingClientRect().top + window.scrollY - 20)")
    tab.screenshot(path=str(ARTIFACTS / "browser-tensor-parallel.png"))
    assert tab.problems == []
