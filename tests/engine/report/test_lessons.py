"""Lessons that stay true on a noisy machine: the simulator's injected step-time noise (off by default, seeded,
forced per call), the lesson fixture current, and the page's lesson text (static/js/lanes/lesson.js, claims.js) checked
by node against simulated runs of `arrivals` and `long-prompt` at more seeds than the committed fixture holds."""
import json
import os
import shutil
import subprocess

import pytest

from engine.engine import Engine
from engine.report.metrics import lane_metrics
from engine.worker.sim import SimNoise
from engine.workload.workload import CLI_LIMITS, parse_workload
from tests.golden import lessons
from tests.kit import ROOT



def records_of(preset: str, noise: SimNoise | None) -> dict[str, list[dict]]:
    obj = json.loads((ROOT / "demos" / f"{preset}.json").read_text())
    engine = Engine(None, CLI_LIMITS, sim_noise=noise)
    run = engine.start(engine.prepare(parse_workload(obj, CLI_LIMITS)))
    run.run_to_end()
    return {k: [r.to_dict() for r in v] for k, v in run.records().items()}


def test_sim_noise_is_off_by_default_and_zero_noise_changes_no_figure():
    assert records_of("long-prompt", None) == records_of("long-prompt", SimNoise(seed=5, spread=0.0))


def test_sim_noise_is_seeded_per_lane_and_forces_one_call():
    a, b = records_of("arrivals", SimNoise(3, 0.3)), records_of("arrivals", SimNoise(3, 0.3))
    assert a == b and a != records_of("arrivals", SimNoise(4, 0.3))
    plain, forced = records_of("long-prompt", None), records_of("long-prompt", SimNoise(0, 0.0, {("chunked 64", 6): 5.0}))
    assert forced["chunked 64"][5]["ms"] == pytest.approx(5 * plain["chunked 64"][5]["ms"])
    assert [r["ms"] for r in forced["continuous"]] == [r["ms"] for r in plain["continuous"]]


def test_sim_noise_spread_out_of_range_is_refused_by_name():
    with pytest.raises(ValueError, match="SimNoise.spread"):
        SimNoise(spread=1.5)


def test_step_time_spread_is_zero_on_the_cost_model_and_sees_noise():
    obj = parse_workload(json.loads((ROOT / "demos" / "long-prompt.json").read_text()), CLI_LIMITS)
    assert lane_metrics(records_of("long-prompt", None)["continuous"], obj)["step_time_spread"] == 0.0
    noisy = lane_metrics(records_of("long-prompt", SimNoise(1, 0.3))["continuous"], obj)["step_time_spread"]
    assert 0.05 < noisy <= 0.3 / 0.7  # within what +-30% can stray from a median that itself strayed


def test_the_committed_lesson_fixture_is_what_the_generator_writes():
    assert lessons.PATH.read_text() == lessons.fixture(), "run python -m tests.golden.lessons"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_lessons_are_true_of_runs_at_more_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(lessons, "SEEDS", range(5, 13))
    path = tmp_path / "runs.json"
    path.write_text(lessons.fixture())
    done = subprocess.run([shutil.which("node"), "--test", "tests/js/lanes/lessons.test.mjs"], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "LESSON_RUNS": str(path)}, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # a test per run of a preset with claims (not the memory lessons: memmap-lesson.test.mjs), then six: the claims
    # themselves, fleet-sessions' claim contradicted, a spectator mid-run, the step numbering, the short lesson
    runs = sum(1 for preset, _, _ in lessons.variants() if preset not in ("paged-vs-reserve", "swap-vs-recompute"))
    assert f"# pass {runs + 6}" in done.stdout and "# fail 0" in done.stdout


def test_run_started_carries_each_prompts_tokens_so_a_spectator_has_them_from_the_start(make_app, connect):
    from engine.worker.sim import estimate_prompt_tokens
    app = make_app(engine=Engine(None))
    probe = connect(app)
    obj = json.loads((ROOT / "demos" / "long-prompt.json").read_text())
    probe.emit("submit", {"workload": obj})
    run_id = probe.wait_for("run_queued")["run_id"]
    started = probe.wait_for("run_started", run_id, timeout=30)
    assert started["prompt_tokens"] == {r["id"]: estimate_prompt_tokens(r["prompt"]) for r in obj["requests"]}


def test_the_presets_carry_their_lesson_claims_to_the_page_and_the_engine_ignores_them(make_app):
    presets = {p["name"]: p for p in make_app(engine=Engine(None)).test_client().get("/api/presets").get_json()["presets"]}
    for name in ("arrivals", "long-prompt"):
        assert presets[name]["claims"] == json.loads((ROOT / "demos" / f"{name}.json").read_text())["claims"]
    assert "claims" not in presets["mixed"]
    obj = json.loads((ROOT / "demos" / "arrivals.json").read_text())
    plain = {k: v for k, v in obj.items() if k != "claims"}
    assert parse_workload(obj, CLI_LIMITS) == parse_workload(plain, CLI_LIMITS)
