"""The benchmark script runs end to end (--quick, on the tiny random Llama) and prints every section's keys.
No timing is asserted: timings belong to the benchmark, not to the tests. Its first_vs_second_run section loads
the real model in fresh processes, hence the model tier."""
import json

import pytest

from scripts import bench

pytestmark = pytest.mark.model


def test_bench_quick_prints_every_section_and_target(tiny, capsys):
    bench.main(["--quick"], lm=tiny)
    out = json.loads(capsys.readouterr().out)
    assert set(bench.SECTIONS) | {"meta", "overhead", "targets"} <= set(out)
    assert set(out["targets"]) == {"static_over_generate", "continuous_over_generate_batch",
                                   "mixed_x8_continuous_over_static_wall", "engine_outside_forward_share",
                                   "decode_batch1_over_floor", "decode_batch8_over_batch1",
                                   "static_over_generate_batch1", "continuous_over_generate_batch_2_5"}
    assert all(t["value"] is not None for name, t in out["targets"].items()
               if name != "decode_batch8_over_batch1")  # --quick decodes 1 and 2 rows only
    steps = out["decode_steps"]
    assert steps["fast_available"] and set(steps["rows"]) == {"1", "2"}
    assert all(row["same_tokens"] and row["fast_ms"] > 0 for row in steps["rows"].values())
    assert out["static_vs_generate"]["tokens_match"] and out["continuous_vs_generate_batch"]["tokens_match"]
    assert {"ratio", "generate_tokens_per_s", "static_tokens_per_s"} <= set(out["static_vs_generate"]["batches"]["1"])
    assert out["decode_floor"]["floor_ms"] > 0 and out["decode_floor"]["call_over_floor"] > 0
    paired = out["decode_floor"]["paired"]
    assert paired["pairs"] == 15 and paired["call_ms"] > 0 and paired["floor_ms"] > 0
    low, high = paired["read_gb_per_s_range"]  # the floor's ms are the weights' bytes at the read's GB/s
    assert 0 < low <= high and low <= out["decode_floor"]["weight_bytes"] / paired["floor_ms"] / 1e6 <= high
    assert set(out["chunked_prefill"]["variants"]) == {"none", "128", "128+fused"}
    assert [row["kv_budget"] for row in out["preemption"]["budgets"]] == [None, 128]
    sweep = out["load_sweep"]
    assert [p["rate"] for p in sweep["points"]] == [1, 8] and set(sweep["p95_ttft_over_2s_from_rate"]) == {
        "static", "dynamic", "continuous"}
    assert all(s["completed"] == 3 for p in sweep["points"] for s in p["lanes"].values())
    prefix = out["prefix_cache"]["presets"]["shared-instructions"]
    assert prefix["tokens_match"] and prefix["without"]["prompt_tokens_cached"] == 0
    assert prefix["with"]["prompt_tokens_cached"] > 0 and prefix["with"]["wall_s"] > 0
    spec = out["speculative"]
    assert set(spec) == {"spec-quote", "spec-chat"} and all(s["tokens_match"] for s in spec.values())
    assert all(s[k]["wall_s"] > 0 and s[k]["tokens_per_s"] > 0 for s in spec.values() for k in ("with", "without"))
    assert out["vllm_race"]["skipped"].startswith("skipped: a vLLM lane needs")  # the tiny Llama has no vLLM twin
