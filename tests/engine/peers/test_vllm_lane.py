"""The vLLM lane at the edge, without vLLM: a lane's `engine`, the options vLLM takes (mapped to its names) and
those it cannot (an error naming them), and the clear refusal where vLLM or the model is missing."""
import pytest

from engine import Engine, WorkloadError, parse_workload
from engine.limits import CLI_LIMITS
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


@pytest.mark.parametrize("key, size", [("tensor_parallel_size", 3), ("pipeline_parallel_size", 2)])
def test_a_vllm_lane_hands_its_tensor_or_pipeline_split_to_vllm_not_to_our_engine(key, size):
    wl = parse_workload(lanes({"name": "split", "engine": "vllm", key: size}), CLI_LIMITS)
    spec = wl.lanes[1]
    assert spec.engine_options == {key: size} and spec.config.tensor_parallel_size == 1  # no ranks of ours
    assert engine_args(spec) == {"max_num_seqs": 4, "max_model_len": 2048, key: size}
    assert parse_workload(wl.to_dict(), CLI_LIMITS).lanes[1] == spec
    assert parse_workload(lanes({"engine": "vllm", key: 1})).lanes[1].engine_options == {}  # 1: one process
    with pytest.raises(WorkloadError) as e:  # the server's limits: no worker processes of a lane's own
        parse_workload(lanes({"engine": "vllm", key: size}))
    assert e.value.field == f"lanes[1].{key}" and "command line" in str(e.value)


@pytest.mark.parametrize("lane, field, words", [
    ({"engine": "vllm", "tensor_parallel_size": 0}, "lanes[1].tensor_parallel_size", "from 1 to 9"),
    ({"engine": "vllm", "tensor_parallel_size": "3"}, "lanes[1].tensor_parallel_size", "integer"),
    ({"engine": "vllm", "pipeline_parallel_size": 3}, "lanes[1].pipeline_parallel_size", "from 1 to 2"),
    ({"engine": "vllm", "tensor_parallel_size": 3, "pipeline_parallel_size": 2}, "lanes[1].pipeline_parallel_size",
     "does not combine"),
    ({"engine": "vllm", "tensor_parallel_size": 3, "disaggregation": {"prefill": 1, "decode": 1}},
     "lanes[1].disaggregation", "one split a lane"),
])
def test_a_vllm_split_it_cannot_take_is_an_error_naming_the_field(lane, field, words):
    with pytest.raises(WorkloadError) as e:
        parse_workload(lanes(lane), CLI_LIMITS)
    assert e.value.field == field and words in str(e.value)


@pytest.mark.vllm
@pytest.mark.model
def test_a_vllm_tensor_parallel_size_must_divide_the_models_heads(engine):
    with pytest.raises(WorkloadError) as e:
        engine.prepare(parse_workload(lanes({"engine": "vllm", "tensor_parallel_size": 2}), CLI_LIMITS))
    assert e.value.field == "lanes[1].tensor_parallel_size"
    assert "9 query heads and 3 KV heads" in str(e.value) and "Sizes that do: 3" in str(e.value)


def test_a_split_vllm_engine_binds_one_core_per_worker_in_turn(monkeypatch):
    from engine.peers import vllm_process
    monkeypatch.setattr(vllm_process.os, "sched_getaffinity", lambda pid: {0, 1})
    assert vllm_process.split_env({"tensor_parallel_size": 3})["VLLM_CPU_OMP_THREADS_BIND"] == "0|1|0"
    assert vllm_process.split_env({"pipeline_parallel_size": 2})["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert vllm_process.split_env({"max_num_seqs": 4}) == {}  # one process: the bridge's own binding (0-1)


def test_a_split_vllm_lane_places_its_workers_as_the_bridge_reported_them(monkeypatch):
    from engine.peers.vllm_lane import split_placement
    from engine.report import placement as P
    monkeypatch.setattr(P, "cores", lambda: 2)
    monkeypatch.setattr(P, "memory_domains", lambda: 1)
    shm = "CpuCommunicator/_CPUSHMDistributed"  # what vLLM-CPU 0.32's workers reported here (vllm_bridge.where)
    ranks = [{"pid": 10 + i, "threads": 1, "cores": [i % 2], "tp_rank": i, "pp_rank": 0, "tp": shm, "pp": None}
             for i in range(3)]
    place = split_placement(ranks, 9, P.placement)
    assert [p["role"] for p in place["processes"]] == ["driver", "vllm tp rank 0", "vllm tp rank 1", "vllm tp rank 2"]
    assert place["oversubscribed"] and place["transport"].startswith("shared memory")
    assert place["says"] == "3 processes of 1 thread on 2 cores, one memory domain: oversubscribed"
    stages = [{**w, "tp_rank": 0, "pp_rank": i, "tp": None, "pp": shm} for i, w in enumerate(ranks[:2])]
    place = split_placement(stages, 9, P.placement)
    assert [p["role"] for p in place["processes"]][1:] == ["vllm pp stage 0", "vllm pp stage 1"]
    assert not place["oversubscribed"]
    assert split_placement(ranks[:1], 9, P.placement) is None  # one process: no placement
