"""The classroom demos on the real default model reproduce the explainer's table exactly."""
import json
from pathlib import Path

import pytest

from engine import Engine, lane_metrics, parse_workload

DEMOS = Path(__file__).resolve().parent.parent / "demos"
TABLE = {  # workload: (steps, tokens/step, slot use, mean TTFT in steps), static then continuous
    "mixed": ((15, 1.93, 0.48, 5.0), (9, 3.22, 0.81, 2.375)),
    "same": ((8, 4.00, 1.00, 3.0), (8, 4.00, 1.00, 3.0)),
    "one-long": ((14, 1.86, 0.46, 7.0), (12, 2.17, 0.54, 2.25)),
}


@pytest.mark.parametrize("name", TABLE)
def test_demo_reproduces_the_classroom_table_on_the_real_model(smol, name):
    workload = json.loads((DEMOS / f"{name}.json").read_text())
    assert workload["slots"] == 4 and workload["description"]
    assert all(r["arrival"] == 0 and r["ignore_eos"] for r in workload["requests"])
    engine = Engine(smol)
    run = engine.start(engine.prepare(parse_workload(workload)), ["static", "continuous"])
    run.run_to_end()
    texts = {}
    for lane, (steps, tps, use, ttft) in zip(("static", "continuous"), TABLE[name]):
        m = lane_metrics(run.lanes[lane].records, run.workload)
        assert m["steps"] == steps
        assert round(m["tokens_per_step"], 2) == tps
        assert round(m["slot_use"], 2) == use
        assert m["mean_ttft_steps"] == pytest.approx(ttft)
        assert m["wall_s"] > 0 and m["tokens_per_s"] > 0 and not m["simulated"]
        texts[lane] = {rid: q["token_ids"] for rid, q in m["requests"].items()}
    assert texts["static"] == texts["continuous"]  # both servers write the same tokens


SPEC_DEMOS = {  # preset: (speculative lane fewer steps than plain continuous, acceptance rate bounds)
    "spec-quote": (True, (0.5, 1.0)),
    "spec-chat": (False, (0.0, 0.2)),
}


@pytest.mark.parametrize("name", SPEC_DEMOS)
def test_speculative_demos_show_where_prompt_lookup_pays_and_where_it_does_not(smol, name):
    workload = json.loads((DEMOS / f"{name}.json").read_text())
    assert workload["description"] and [lane if isinstance(lane, str) else lane["policy"]
                                        for lane in workload["lanes"]] == ["continuous", "continuous"]
    engine = Engine(smol)
    run = engine.start(engine.prepare(parse_workload(workload)))
    run.run_to_end()
    plain, spec = (lane_metrics(run.lanes[lane.name].records, run.workload) for lane in run.workload.lanes)
    fewer, (low, high) = SPEC_DEMOS[name]
    assert (spec["steps"] < plain["steps"] * 0.5) if fewer else spec["steps"] == plain["steps"]
    assert low <= spec["spec_acceptance_rate"] <= high and plain["spec_acceptance_rate"] is None
    assert spec["tokens_per_decode_cell"] > (2 if fewer else 1) and plain["tokens_per_decode_cell"] == 1
    assert {rid: q["token_ids"] for rid, q in spec["requests"].items()} == \
        {rid: q["token_ids"] for rid, q in plain["requests"].items()}  # the same tokens, speculation or not
