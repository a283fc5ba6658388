"""SLOs (engine/workload/slo.py): targets checked with errors that name the field, the verdict on one request, a lane's
met count, goodput and attainment in lane_metrics (golden records of the simulator: no model), the presets that set
an SLO, and the sweep's goodput counted by the same verdict. tests/js/core/slo.test.mjs holds the page's twin to it."""
import json
from dataclasses import replace

import pytest

from engine.limits import WorkloadError
from engine.report.metrics import lane_metrics
from engine.report.sweep import serving_metrics
from engine.workload.slo import SLO, meets_slo, parse_slo, slo_figures, slo_misses, slo_words
from engine.workload.workload import CLI_LIMITS, parse_workload
from tests.kit import ROOT

CASES = json.loads((ROOT / "tests" / "golden" / "metrics.json").read_text())


def request(ttft_ms, tpot_ms, returned=True) -> dict:
    return {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "return_step": 5 if returned else None}


@pytest.mark.parametrize("raw, field, words", [
    ({}, "slo", "give ttft_ms, tpot_ms or both"),
    ({"ttft_ms": 0}, "slo.ttft_ms", "more than 0"),
    ({"tpot_ms": -5}, "slo.tpot_ms", "more than 0"),
    ({"ttft_ms": 4_000_000}, "slo.ttft_ms", "at most 3600000"),
    ({"ttft_ms": "fast"}, "slo.ttft_ms", "a number of milliseconds"),
    ({"ttft_ms": True}, "slo.ttft_ms", "a number of milliseconds"),
    ({"ttft_ms": float("nan")}, "slo.ttft_ms", "a number of milliseconds"),
    ({"ttft_s": 1}, "slo.ttft_s", "use ttft_ms and tpot_ms"),
    ([500], "slo", "must be an object"),
])
def test_a_bad_slo_is_refused_naming_the_field(raw, field, words):
    with pytest.raises(WorkloadError, match=words) as e:
        parse_slo(raw)
    assert e.value.field == field


def test_the_slo_dataclass_refuses_bad_targets_with_a_value_error():
    with pytest.raises(ValueError, match="slo.tpot_ms: must be more than 0"):
        SLO(ttft_ms=100, tpot_ms=0)
    assert SLO(ttft_ms=500).to_dict() == {"ttft_ms": 500}
    assert slo_words(SLO(700, 150)) == "TTFT <= 700 ms, TPOT <= 150 ms"


def test_a_request_meets_the_slo_at_its_targets_and_misses_just_past_them():
    slo = SLO(ttft_ms=500, tpot_ms=100)
    assert meets_slo(request(500, 100), slo) is True                  # at the target: met
    assert slo_misses(request(500.01, 100.01), slo) == ["ttft", "tpot"]
    assert meets_slo(request(200, None), slo) is True                 # a one-token answer has no TPOT: met
    assert meets_slo(request(None, None, returned=False), slo) is None  # not returned: no verdict yet
    assert meets_slo(request(900, 10), SLO(tpot_ms=50)) is True       # no TTFT target: any TTFT meets it


def test_a_lanes_figures_count_the_returned_requests_that_met_every_target():
    requests = [request(100, 50), request(600, 50), request(100, 150), request(None, None, returned=False)]
    assert slo_figures(requests, 2.0, SLO(500, 100)) == {"slo_met": 1, "request_goodput": 0.5, "slo_attainment": 1 / 3}
    assert slo_figures(requests, 2.0, None) == dict.fromkeys(("slo_met", "request_goodput", "slo_attainment"))
    assert slo_figures([], 0.0, SLO(500))["request_goodput"] is None


def test_a_workload_carries_its_slo_and_writes_it_back():
    obj = json.loads((ROOT / "demos" / "sjf.json").read_text())
    workload = parse_workload(obj, CLI_LIMITS)
    assert workload.slo == SLO(700, 150) and workload.to_dict()["slo"] == {"ttft_ms": 700, "tpot_ms": 150}
    assert parse_workload(workload.to_dict(), CLI_LIMITS).slo == workload.slo
    assert parse_workload({**obj, "slo": None}, CLI_LIMITS).slo is None
    with pytest.raises(WorkloadError, match="slo.tpot_ms"):
        parse_workload({**obj, "slo": {"ttft_ms": 700, "tpot_ms": "x"}}, CLI_LIMITS)


@pytest.mark.parametrize("demo", ["arrivals", "long-prompt", "sjf", "azure-code-burst"])
def test_the_presets_that_teach_slos_set_one(demo):
    obj = json.loads((ROOT / "demos" / f"{demo}.json").read_text())
    assert parse_slo(obj["slo"]) is not None


def test_the_golden_lanes_differ_in_what_met_the_slo_though_sjf_and_fcfs_answer_as_fast():
    """The simulator's records (tests/golden/metrics.json): continuous meets the arrivals preset's SLO for all 8
    requests, dynamic for 4; sjf for 6 of 8 requests, at the same requests/s fcfs answers 3 in (demos/sjf.json)."""
    got = {name: CASES[name]["expected"] for name in ("ms_arrivals_dynamic", "ms_arrivals_continuous", "sjf")}
    assert [got[n]["slo_met"] for n in got] == [4, 8, 6]
    assert got["ms_arrivals_continuous"]["slo_attainment"] == 1.0
    for m in got.values():
        assert m["request_goodput"] == pytest.approx(m["slo_met"] / m["wall_s"])
        assert m["request_goodput"] <= m["requests_per_s"]
    assert CASES["static"]["expected"]["slo_met"] is None  # demos/mixed.json sets no SLO: the figures are none


def test_a_fleets_figures_pool_its_replicas_requests_on_its_wall_clock():
    case = CASES["fleet"]
    slo = SLO(ttft_ms=250, tpot_ms=80)
    m = lane_metrics(case["records"], replace(parse_workload(case["workload"], CLI_LIMITS), slo=slo))
    verdicts = [meets_slo(q, slo) for q in m["requests"].values()]
    assert m["slo_met"] == sum(v is True for v in verdicts) and m["slo_attainment"] == m["slo_met"] / len(verdicts)
    assert m["request_goodput"] == pytest.approx(m["slo_met"] / m["wall_s"])
    assert m["slo_met"] == case["expected"]["slo_met"] == 8  # the golden fleet case sets this SLO (tests/golden/make.py)


def test_the_sweeps_goodput_counts_by_the_same_verdict():
    m = CASES["sjf"]["expected"]
    point = serving_metrics(m, slo_ttft_ms=700, slo_tpot_ms=150)
    assert point["request_goodput"] == pytest.approx(m["request_goodput"])
    assert serving_metrics(m)["request_goodput"] == pytest.approx(m["requests_per_s"])  # no SLO: every request counts


def test_the_cli_prints_good_s_beside_tok_s_and_what_each_lane_met(capsys):
    from engine.cli import commands
    assert commands.main(["run", "demos/sjf.json", "--backend", "sim"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(line for line in out if line.startswith("lane "))
    assert head.split().index("good/s") == head.split().index("tok/s") + 1
    assert "SLO: TTFT <= 700 ms, TPOT <= 150 ms - met fcfs 3/8, sjf 6/8" in out
    assert commands.main(["run", "demos/sjf.json", "--backend", "sim", "--slo-ttft-ms", "2000"]) == 0
    assert "SLO: TTFT <= 2000 ms, TPOT <= 150 ms - met fcfs 8/8, sjf 8/8" in capsys.readouterr().out
