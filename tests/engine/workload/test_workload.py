"""Workload checks that need the tokenizer (here the simulator's token estimate): total work and lane KV."""
import pytest

from engine import Engine, Limits, WorkloadError, parse_workload


def workload(n: int, new: int, slots: int = 4, chars: int = 40) -> dict:
    return {"name": "w", "slots": slots, "requests": [
        {"id": f"R{i}", "prompt": "x" * chars, "max_new_tokens": new} for i in range(n)]}


def test_total_tokens_of_a_workload_are_capped():
    engine = Engine(None, Limits(max_total_tokens=500))
    engine.prepare(parse_workload(workload(4, 50)))  # 4 x (40 prompt + 50 new) = 360
    with pytest.raises(WorkloadError) as e:
        engine.prepare(parse_workload(workload(8, 50)))  # 720
    assert e.value.field == "requests" and "720" in str(e.value) and "500" in str(e.value)


def test_kv_a_lane_allocates_is_capped():
    engine = Engine(None, Limits(max_lane_kv_tokens=1000))
    engine.prepare(parse_workload(workload(2, 200, slots=4)))  # 4 slots x (40 + 200) = 960
    with pytest.raises(WorkloadError) as e:
        engine.prepare(parse_workload(workload(2, 200, slots=5)))  # 1200
    assert e.value.field == "slots" and "1200" in str(e.value) and "1000" in str(e.value)


@pytest.mark.parametrize("obj, field", [
    ({"requests": []}, "requests"),
    ({"requests": [{"id": "a", "prompt": "hi"}]}, "requests[0].max_new_tokens"),
    ({"requests": [{"id": "a", "prompt": " ", "max_new_tokens": 2}]}, "requests[0].prompt"),
    ({"requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}] * 2}, "requests[1].id"),
    ({"lanes": ["static", "fast"], "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}, "lanes[1]"),
    ({"bogus": 1, "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}, "bogus"),
    ({"chunk_size": 0, "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}, "chunk_size"),
    ({"policy": "lifo", "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}, "policy"),
    ({"policy": ["fcfs"], "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}, "policy"),
    ({"scheduling_policy": ["sjf"], "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}, "scheduling_policy"),
    ({"lanes": [{"policy": ["static"]}], "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}, "lanes[0].policy"),
])
def test_bad_workloads_name_the_field(obj, field):
    with pytest.raises(WorkloadError) as e:
        parse_workload({"name": "w", "slots": 4, **obj})
    assert e.value.field == field
