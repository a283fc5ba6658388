"""engine/report/metrics.py against the golden fixture (tests/golden/metrics.json, written by `python -m tests.golden.make`
from real runs): the step records of one lane of each kind go in, exactly the stored metrics come out. No model, no
browser; tests/js/core/metrics.test.mjs holds static/js/core/metrics.js to the same answers."""
import json

import pytest

from engine.report.metric_table import METRICS
from engine.report.metrics import REQUEST_FIELDS, lane_metrics
from engine.report.pd_metrics import PD_REQUEST_FIELDS
from engine.workload.workload import CLI_LIMITS, parse_workload
from tests.kit import ROOT

CASES = json.loads((ROOT / "tests" / "golden" / "metrics.json").read_text())
KINDS = {"static", "dynamic", "continuous", "chunked_prefill", "preemption", "swap", "prefix_cache", "speculative",
         "ms_arrivals_dynamic", "ms_arrivals_continuous", "pd", "pd_model", "pd_vllm"}


def computed(case: dict) -> dict:
    m = lane_metrics(case["records"], parse_workload(case["workload"], CLI_LIMITS))
    fields = REQUEST_FIELDS + (PD_REQUEST_FIELDS if "pd" in m else ())  # a P/D lane: the hand-off and the TTFT parts
    m["requests"] = {rid: {k: q[k] for k in fields} for rid, q in m["requests"].items()}
    return m


def test_the_fixture_holds_every_kind_of_lane_and_each_shows_what_it_is_for():
    assert KINDS <= set(CASES)
    facts = {name: c["expected"] for name, c in CASES.items()}
    assert facts["static"]["padding_slot_steps"] > 0 and facts["preemption"]["preemptions"] > 0
    assert facts["preemption"]["swaps"] == 0 and facts["swap"]["preemptions"] == facts["swap"]["swaps"] > 0
    assert facts["prefix_cache"]["prompt_tokens_cached"] > 0 and facts["speculative"]["spec_acceptance_rate"] > 0
    assert facts["speculative"]["simulated"] is False and facts["continuous"]["simulated"] is True
    assert any(cell.get("prefill", [0, 0])[0] < cell.get("prefill", [0, 0])[1]  # a partial prefill: it chunked
               for r in CASES["chunked_prefill"]["records"] for cell in r["slots"])
    assert all("arrival_ms" in q for q in CASES["ms_arrivals_dynamic"]["workload"]["requests"])
    assert facts["preemption"]["p95_queue_ms"] > facts["continuous"]["p95_queue_ms"] > 0
    # a P/D lane on the simulator and on SmolLM2, whose copies went through shared memory: bytes = blocks x 737,280
    assert facts["pd"]["pd"]["through"] == ["simulated"] and facts["pd_model"]["pd"]["through"] == ["shared_memory"]
    assert facts["pd_model"]["simulated"] is False
    assert facts["pd_model"]["pd"]["bytes"] == facts["pd_model"]["pd"]["blocks"] * 737280 > 0
    # the real vLLM pair: ExampleConnector's full 32-token blocks, and where its two processes ran
    assert facts["pd_vllm"]["pd"]["through"] == ["vllm_example_connector"]
    assert facts["pd_vllm"]["pd"]["bytes"] == facts["pd_vllm"]["pd"]["blocks"] * 32 * 46080 > 0
    assert [p["role"] for p in facts["pd_vllm"]["placement"]["processes"]] == ["prefill", "decode"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_lane_metrics_of_the_golden_records_are_the_golden_metrics(name):
    assert computed(CASES[name]) == CASES[name]["expected"]


def test_queue_time_counts_from_arrival_to_the_start_of_the_step_that_first_admitted_the_request():
    case = CASES["preemption"]
    starts = {r["step"]: r["start_ms"] for r in case["records"]}
    first = {}
    for r in case["records"]:
        for rid in r["admitted"]:
            first.setdefault(rid, r["step"])
    for rid, q in case["expected"]["requests"].items():
        assert q["admit_step"] == first[rid] and q["queue_ms"] == pytest.approx(starts[first[rid]] - q["arrival_ms"])
    readmitted = [rid for r in case["records"] for rid in r["admitted"]]
    assert len(readmitted) > len(set(readmitted))  # a preempted request was admitted again: only its first counts


def test_a_record_stored_before_simulated_was_a_field_still_says_simulated():
    case = CASES["continuous"]
    workload = parse_workload(case["workload"], CLI_LIMITS)
    old = [{k: v for k, v in r.items() if k != "simulated"} | {"extra": {"simulated": True}} for r in case["records"]]
    new = [{k: v for k, v in r.items() if k != "extra"} | {"simulated": True} for r in case["records"]]
    assert lane_metrics(old, workload)["simulated"] is lane_metrics(new, workload)["simulated"] is True


def test_a_new_cell_state_is_an_error_naming_it_not_a_key_error():
    case = CASES["continuous"]
    records = json.loads(json.dumps(case["records"]))
    records[0]["slots"][0]["state"] = "paused"  # ("swapped" is a state now: engine/step.py SlotState.SWAPPED)
    with pytest.raises(ValueError, match="paused"):
        lane_metrics(records, parse_workload(case["workload"], CLI_LIMITS))


def test_the_table_defines_exactly_the_numbers_lane_metrics_computes():
    numbers = {k for k in CASES["continuous"]["expected"] if k not in ("requests", "simulated")}
    table = set(METRICS)
    assert not table - numbers, f"in the metric table but not computed by lane_metrics: {sorted(table - numbers)}"
    assert not numbers - table, f"computed by lane_metrics but not in the metric table: {sorted(numbers - table)}"
