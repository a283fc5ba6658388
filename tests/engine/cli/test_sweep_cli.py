"""`python -m engine sweep` takes every flag `run` takes, and each changes a sweep's result the way it changes a run's.

A workload with a `generate` section swept at its own rate is the very workload `run` reads, so a sweep point's
serving metrics must equal `serving_metrics` of the run's lane metrics, flag by flag (the simulator, tiny mixes).
"""
import json

import pytest

from engine.cli import commands as cli
from engine.report.sweep import serving_metrics

RATE = 8.0
# Six requests at RATE/s onto two slots: a queue forms, so admission order, budgets, chunks and fusing all matter.
WORKLOAD = {"name": "tiny", "slots": 2, "lanes": ["static", "dynamic", "continuous"], "kv_budget": 128,
            "generate": {"n": 6, "rate": RATE, "seed": 3, "output_tokens": [2, 9, 4], "prompt_words": [6, 12]}}
# One value for every flag of `run` that shapes the lanes; a flag added to the parser fails the test until it has one.
SAMPLES = {"lanes": ["--lanes", "continuous,dynamic"], "slots": ["--slots", "3"], "max_wait": ["--max-wait", "2"],
           "max_wait_ms": ["--max-wait-ms", "10"], "scheduling_policy": ["--scheduling-policy", "sjf"],
           "chunk_size": ["--chunk-size", "8"], "max_batch_tokens": ["--max-batch-tokens", "12"],
           "kv_budget": ["--kv-budget", "96"], "kv_block_size": ["--kv-block-size", "32"], "fused": ["--fused"],
           "prefix_cache": ["--prefix-cache"]}
# What only a `run` prints (a trace file), and the flags that choose the engine: `make_engine`, shared by both.
RUN_ONLY = {"help", "workload", "trace"}
ENGINE = {"backend", "model", "dtype", "device"}
# The SLO's targets: both commands take them under the same names (a run's good/s, a sweep's goodput), and neither
# shapes a lane (tests/engine/report/test_slo.py holds both to one verdict).
SLO_FLAGS = {"slo_ttft_ms", "slo_tpot_ms"}


def subparser(name: str):
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    return sub.choices[name]


def flags_of(name: str) -> dict[str, list[str]]:
    return {a.dest: a.option_strings for a in subparser(name)._actions}


def outcome(capsys, *argv) -> tuple[int, object]:
    """What a command did: its exit status and its JSON (or its error line)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else err.strip().splitlines()[-1]


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(WORKLOAD))
    return str(path)


def test_sweep_takes_every_flag_run_takes():
    run, sweep = flags_of("run"), flags_of("sweep")
    missing = {dest: opts for dest, opts in run.items() if dest not in RUN_ONLY and sweep.get(dest) != opts}
    assert not missing


def test_every_lane_flag_of_run_has_a_sample():
    lane_flags = set(flags_of("run")) - RUN_ONLY - ENGINE - SLO_FLAGS - {"json"}
    assert lane_flags == set(SAMPLES)


@pytest.mark.parametrize("dest", sorted(SAMPLES))
def test_each_run_flag_changes_a_sweep_as_it_changes_a_run(dest, workload, capsys):
    flag = SAMPLES[dest]
    base = ["--backend", "sim", "--json"]
    plain = outcome(capsys, "run", workload, *base)
    run = outcome(capsys, "run", workload, *base, *flag)
    sweep = outcome(capsys, "sweep", workload, "--rates", f"{RATE:g}", *base, *flag)
    assert run != plain, f"{flag} changes nothing on this workload: the comparison below would prove nothing"
    assert sweep[0] == run[0]
    if run[0] != 0:  # refused (e.g. --max-wait counts steps, the mix's arrivals are in ms): refused the same way
        assert sweep[1] == run[1]
        return
    (point,) = sweep[1]["points"]
    assert point["rate"] == RATE and list(point["lanes"]) == list(run[1]["lanes"])
    for lane, m in run[1]["lanes"].items():
        assert point["lanes"][lane] == serving_metrics(m), lane
