"""The vLLM lane at the edge, without vLLM: a lane's `engine`, the options vLLM takes (mapped to its names) and
those it cannot (an error naming them), and the clear refusal where vLLM or the model is missing."""
import pytest

from engine import Engine, WorkloadError, parse_workload
from engine.peers.vllm_options import engine_args
from tests.kit import ROOT

REQ = [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]


def lanes(*lane) -> dict:
    return {"name": "w", "requests": REQ, "lanes": ["continuous", *lane]}


def test_a_vllm_lane_is_continuous_with_vllm_defaults_and_its_slots_as_max_num_seqs():
    wl = parse_workload({**lanes({"name": "vLLM", "engine": "vllm"}), "slots": 3, "chunk_size": 32})
    spec = wl.lanes[1]
    assert (spec.engine, spec.policy, spec.engine_options) == ("vllm", "continuous", {})
    assert wl.lanes[0].engine == "batch-lanes"
    # the workload's chunk_size is our lanes' default, not vLLM's: only max_num_seqs (its slots) is set
    assert engine_args(spec) == {"max_num_seqs": 3, "max_model_len": 2048}
    assert wl.to_dict()["lanes"][1] == {"name": "vLLM", "engine": "vllm", "policy": "continuous"}
    assert parse_workload(wl.to_dict()).lanes[1] == spec


def test_a_vllm_lane_maps_the_options_it_sets_to_vllms_names():
    wl = parse_workload(lanes({"engine": "vllm", "slots": 2, "max_batch_tokens": 64, "chunk_size": 16,
                               "prefix_cache": False, "kv_budget": 512}))
    spec = wl.lanes[1]
    assert spec.name == "vLLM"
    assert engine_args(spec) == {"max_num_seqs": 2, "max_model_len": 2048, "max_num_batched_tokens": 64,
                                 "long_prefill_token_threshold": 16, "enable_prefix_caching": False,
                                 "num_gpu_blocks_override": 4}
    assert parse_workload(wl.to_dict()).lanes[1] == spec


@pytest.mark.parametrize("lane, field, words", [
    ({"engine": "vllm", "policy": "static"}, "lanes[1].policy", "continuous"),
    ({"engine": "vllm", "fused": True}, "lanes[1].fused", "one forward"),
    ({"engine": "vllm", "speculative": {"method": "prompt_lookup", "k": 2}}, "lanes[1].speculative", "ngram"),
    ({"engine": "vllm", "scheduling_policy": "sjf"}, "lanes[1].scheduling_policy", "fcfs"),
    ({"engine": "vllm", "kv_block_size": 24}, "lanes[1].kv_block_size", "multiple of 32"),
    ({"engine": "tgi"}, "lanes[1].engine", "batch-lanes, vllm"),
    ({"engine": "vllm", "chunk_size": 0}, "lanes[1].chunk_size", ""),
])
def test_an_option_a_vllm_lane_cannot_take_is_an_error_naming_it(lane, field, words):
    with pytest.raises(WorkloadError) as e:
        parse_workload(lanes(lane))
    assert e.value.field == field and words in str(e.value)


def test_a_vllm_lane_on_the_simulator_is_refused_before_the_run():
    wl = parse_workload(lanes({"name": "vLLM", "engine": "vllm"}))
    with pytest.raises(WorkloadError) as e:
        Engine(None).prepare(wl)
    assert e.value.field == "lanes[1].engine" and "simulator" in str(e.value)


def test_a_vllm_lane_where_vllm_is_not_installed_says_make_vllm(tiny, monkeypatch, tmp_path):
    monkeypatch.setenv("BATCH_LANES_VLLM_PYTHON", str(tmp_path / "none" / "python"))
    with pytest.raises(WorkloadError) as e:
        Engine(tiny).prepare(parse_workload(lanes({"name": "vLLM", "engine": "vllm"})))
    assert e.value.field == "lanes[1].engine" and "make vllm" in str(e.value)


def test_the_vllm_preset_parses_and_on_the_simulator_says_it_needs_the_model():
    import json

    obj = json.loads((ROOT / "demos" / "vllm.json").read_text())
    wl = parse_workload(obj)
    assert [(lane.name, lane.engine) for lane in wl.lanes] == [
        ("continuous", "batch-lanes"), ("continuous chunked", "batch-lanes"), ("vLLM", "vllm")]
    with pytest.raises(WorkloadError) as e:
        Engine(None).prepare(wl)
    assert e.value.field == "lanes[2].engine"
