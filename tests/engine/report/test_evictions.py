"""Evictions counted honestly (issue 34): a swap-out is an eviction. On the simulator, swap-vs-recompute's two lanes
each evict R3 once, at step 30: the recompute lane frees its blocks (a preempted cell), the swap lane copies them to
the host pool (a swapped cell). `preemptions` counts both kinds, `swaps` the swap-outs alone, and the CLI's `evict`
and `swaps` columns print them. tests/js/core/metrics.test.mjs holds the page to the same numbers (tests/golden/metrics.json's
swap case). No model."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.engine import Engine
from engine.report.metrics import lane_metrics
from engine.step import SlotState
from engine.workload.workload import CLI_LIMITS, parse_workload

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "demos" / "swap-vs-recompute.json"


@pytest.fixture(scope="module")
def run():
    workload = parse_workload(json.loads(DEMO.read_text()), CLI_LIMITS)
    engine = Engine(None, CLI_LIMITS)
    run = engine.start(engine.prepare(workload))
    run.run_to_end()
    return workload, run.records()


def test_the_swap_lane_counts_its_swap_out_as_an_eviction_and_as_a_swap(run):
    workload, records = run
    swap, recompute = (lane_metrics(records[name], workload) for name in ("swap", "recompute"))
    assert [(r.step, c.request) for r in records["swap"] for c in r.slots if c.state is SlotState.SWAPPED] == [(30, "R3")]
    assert (swap["preemptions"], swap["swaps"]) == (1, 1)  # was (0, -): the swap lane read as if it evicted nothing
    assert (recompute["preemptions"], recompute["swaps"]) == (1, 0)
    for m in (swap, recompute):
        assert {rid: q["preemptions"] for rid, q in m["requests"].items()} == \
            {"R1": 0, "R2": 0, "R3": 1, "R4": 0, "R5": 0, "R6": 0}


def test_every_eviction_cell_counts_once_in_the_lane_and_once_for_its_request(run):
    workload, records = run
    for name, recs in records.items():
        m = lane_metrics(recs, workload)
        cells = [c for r in recs for c in r.slots if c.state in (SlotState.PREEMPTED, SlotState.SWAPPED)]
        assert m["preemptions"] == len(cells) == sum(q["preemptions"] for q in m["requests"].values()), name
        assert m["swaps"] == sum(c.state is SlotState.SWAPPED for c in cells), name


@pytest.mark.slow   # the CLI in a subprocess: ~6 s
def test_the_cli_table_prints_the_swap_lanes_swap_out_under_evict_and_swaps():
    p = subprocess.run([sys.executable, "-m", "engine", "run", str(DEMO), "--backend", "sim"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    head = next(line for line in lines if line.startswith("lane "))

    def column(lane: str, heading: str) -> str:  # the columns are right-aligned under their headings
        row = next(line for line in lines if line.startswith(lane + " "))
        return row[:head.index(f" {heading}") + 1 + len(heading)].split()[-1]

    assert [column(lane, "evict") for lane in ("recompute", "swap")] == ["1", "1"]
    assert [column(lane, "swaps") for lane in ("recompute", "swap")] == ["0", "1"]
