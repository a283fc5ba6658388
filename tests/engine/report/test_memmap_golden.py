"""engine/report/metrics.py token_utilization against the hand-checked fixture tests/golden/memmap.json, the same records
tests/js/core/memmap.test.mjs gives static/js/core/memmap.js: both languages must answer the same number."""
import json

from engine.report.metrics import lane_block_size, token_utilization
from engine.workload.workload import CLI_LIMITS, parse_workload
from tests.kit import ROOT

CASE = json.loads((ROOT / "tests" / "golden" / "memmap.json").read_text())


def test_token_utilization_of_the_hand_made_records_is_the_hand_checked_figure():
    assert token_utilization(CASE["records"], CASE["block_size"]) == CASE["expected"]["token_utilization"]


def test_token_utilization_is_none_for_records_stored_before_paging():
    assert token_utilization([{"lane": "x", "step": 1, "slots": [], "kv_used": 3}], 16) is None


def test_a_lanes_block_size_is_its_own_option_else_the_workloads():
    workload = parse_workload({"slots": 1, "kv_block_size": 4, "lanes": [
        {"name": "paged", "policy": "continuous", "kv_block_size": 8}, "continuous"],
        "requests": [{"id": "R1", "prompt": "hi", "max_new_tokens": 2}]}, CLI_LIMITS)
    assert lane_block_size([{"lane": "paged"}], workload) == 8
    assert lane_block_size([{"lane": "continuous"}], workload) == 4
