"""What a run announces beside its workload (engine/workload/announce.py): every lane with every option resolved and
the requests as the lanes run them, so that the page has no defaults of its own (issue 34)."""
from dataclasses import fields

from engine.config import EngineConfig
from engine.workload.announce import announced
from engine.workload.workload import load_workload, parse_workload
from tests.kit import ROOT


def test_every_lane_carries_every_option_as_it_runs_and_what_it_says_itself():
    wl = load_workload(ROOT / "demos" / "long-prompt.json")
    configs = announced(wl)["lane_configs"]
    assert list(configs) == wl.lane_names
    for lane in wl.lanes:
        got = configs[lane.name]
        assert set(got["config"]) == {f.name for f in fields(EngineConfig)}
        assert got["config"]["slots"] == lane.config.slots and got["policy"] == lane.policy
    chunked = next(lane for lane in wl.lanes if lane.config.chunk_size)
    assert configs[chunked.name]["options"]["chunk_size"] == chunked.config.chunk_size
    assert configs["static"]["options"] == {}


def test_a_workload_option_reaches_every_lane_and_a_lane_option_only_its_own():
    wl = parse_workload({"name": "w", "slots": 3, "kv_budget": 96, "requests": [{"id": "a", "prompt": "x",
                         "max_new_tokens": 2}], "lanes": ["static", {"name": "c8", "policy": "continuous", "slots": 8}]})
    configs = announced(wl)["lane_configs"]
    assert configs["static"]["config"]["slots"] == 3 and configs["static"]["config"]["kv_budget"] == 96
    assert configs["c8"]["config"]["slots"] == 8 and configs["c8"]["options"] == {"slots": 8}
