"""Arrival processes: generated mixes are seeded, Poisson at the asked rate, burstier below burstiness 1, and
ordinary workloads; the CLI generates, runs lane configurations and sweeps rates (on the simulator)."""
import contextlib
import io
import json
import random
import statistics

import pytest

from engine import Limits, WorkloadError, parse_workload
from engine.workload.arrivals import arrival_times_ms, generate_requests
from engine.cli.commands import main
from tests.kit import ROOT



def rate_of(times_ms: list[float]) -> float:
    return (len(times_ms) - 1) / (times_ms[-1] / 1000)


def test_the_same_seed_gives_the_same_requests_and_another_seed_others():
    spec = {"n": 20, "rate": 3, "burstiness": 0.5, "seed": 11, "output_tokens": [4, 8, 16],
            "prompt_words": {"min": 2, "max": 30}}
    assert generate_requests(spec) == generate_requests(dict(spec))
    assert generate_requests(spec) != generate_requests({**spec, "seed": 12})


@pytest.mark.parametrize("rate", [0.5, 4, 50])
def test_poisson_rate_is_within_ten_percent_over_a_thousand_draws(rate):
    times = arrival_times_ms(1000, rate, 1.0, random.Random(1))
    assert times[0] == 0 and times == sorted(times)
    assert rate_of(times) == pytest.approx(rate, rel=0.10)
    gaps = [b - a for a, b in zip(times, times[1:])]
    # exponential gaps: the standard deviation is about the mean (coefficient of variation 1)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(1.0, abs=0.1)


def test_burstiness_below_one_is_burstier_and_above_one_more_even_at_the_same_rate():
    def cv(b):
        times = arrival_times_ms(1000, 4, b, random.Random(2))
        gaps = [y - x for x, y in zip(times, times[1:])]
        assert rate_of(times) == pytest.approx(4, rel=0.15)
        return statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert cv(0.25) > 1.5 > cv(1.0) > 0.8 > cv(4.0)  # a Gamma(k) gap's coefficient of variation is 1/sqrt(k)


def test_lengths_come_from_the_list_or_the_range_and_prompts_from_the_given_ones():
    reqs = generate_requests({"n": 30, "rate": 1, "output_tokens": [3, 9], "prompts": ["a?", "b?"], "seed": 0})
    assert {r["max_new_tokens"] for r in reqs} == {3, 9} and {r["prompt"] for r in reqs} == {"a?", "b?"}
    reqs = generate_requests({"n": 30, "rate": 1, "output_tokens": {"min": 5, "max": 6},
                              "prompt_words": {"min": 1, "max": 3}})
    assert {r["max_new_tokens"] for r in reqs} == {5, 6}
    assert all(1 <= len(r["prompt"].split(": ", 1)[1].split()) <= 3 for r in reqs)


def test_a_generated_mix_is_an_ordinary_workload_that_round_trips():
    wl = parse_workload({"name": "g", "generate": {"n": 5, "rate": 2, "seed": 4}})
    assert wl.timed and len(wl.requests) == 5
    again = parse_workload(wl.to_dict())
    assert again.requests == wl.requests and again.to_dict() == wl.to_dict()


@pytest.mark.parametrize("spec, field", [
    ({"n": 0}, "generate.n"), ({"n": 40}, "generate.n"), ({"rate": -1}, "generate.rate"),
    ({"burstiness": 0}, "generate.burstiness"), ({"seed": -1}, "generate.seed"),
    ({"output_tokens": []}, "generate.output_tokens"), ({"output_tokens": {"min": 9, "max": 3}}, "generate.output_tokens.max"),
    ({"output_tokens": [4, 999]}, "generate.output_tokens[1]"), ({"prompts": ["x"], "prompt_words": [3]}, "generate.prompts"),
    ({"turbo": 1}, "generate.turbo"), ({"rate": True}, "generate.rate"),
])
def test_bad_generators_name_the_field(spec, field):
    with pytest.raises(WorkloadError) as e:
        generate_requests(spec, Limits())
    assert e.value.field == field


def cli(*args):
    """`python -m engine ARGS`'s output, run in this process (the subprocess path is tests/engine/cli/test_cli.py's)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, err.getvalue()
    return out.getvalue()


def test_cli_generates_a_workload_that_runs_on_lane_configurations(tmp_path):
    path = tmp_path / "mix.json"
    path.write_text(cli("generate", "--n", "6", "--rate", "5", "--seed", "2", "--output-tokens", "2,4"))
    obj = json.loads(path.read_text())
    assert [r["id"] for r in obj["requests"]] == [f"R{i}" for i in range(1, 7)]
    assert all("arrival_ms" in r for r in obj["requests"])
    lanes = json.dumps(["static", {"name": "chunked 8", "policy": "continuous", "chunk_size": 8}])
    out = json.loads(cli("run", str(path), "--backend", "sim", "--lanes", lanes, "--json"))
    assert list(out["lanes"]) == ["static", "chunked 8"] and out["simulated"] is True
    assert all(m["tokens"] == sum(r["max_new_tokens"] for r in obj["requests"]) for m in out["lanes"].values())


def test_sweep_cli_on_the_simulator_reports_vllm_bench_serve_numbers_per_rate_and_lane():
    out = json.loads(cli("sweep", "demos/poisson.json", "--backend", "sim", "--rates", "0.5,2,16",
                         "--slo-ttft-ms", "1000", "--lanes", "static,continuous", "--json"))
    assert out["rates"] == [0.5, 2.0, 16.0] and out["simulated"] is True and out["lanes"] == ["static", "continuous"]
    keys = {"completed", "duration", "request_throughput", "output_throughput", "request_goodput", "mean_ttft_ms",
            "median_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_itl_ms", "p99_e2el_ms"}
    for point in out["points"]:
        for lane, s in point["lanes"].items():
            assert keys <= set(s) and s["completed"] == 12
            assert s["request_goodput"] <= s["request_throughput"]
    first, last = out["points"][0]["lanes"], out["points"][-1]["lanes"]
    # more load: more requests per second done, and for continuous a queue (its p95 TTFT rises) ...
    assert all(last[lane]["request_throughput"] > first[lane]["request_throughput"] for lane in ("static", "continuous"))
    assert last["continuous"]["p95_ttft_ms"] > first["continuous"]["p95_ttft_ms"]
    # ... while at a low rate static's TTFT is its wait for a full group of four
    assert first["static"]["p95_ttft_ms"] > 4 * first["continuous"]["p95_ttft_ms"]
    assert [round(p["offered_rate"] / p["rate"], 1) for p in out["points"]] == [1.0, 1.0, 1.0]  # seed 0 draws true
    table = cli("sweep", "demos/poisson.json", "--backend", "sim", "--rates", "1,4")
    assert "p95 TTFT above 2 s from:" in table and "SIMULATED" in table
