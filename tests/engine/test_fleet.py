"""Fleets (engine/fleet.py, engine/sched/router.py): a data-parallel lane's replicas behind a router. Every router
sends each request to one replica and the tokens stay solo generate()'s (the tiny model; the real one on the mixed
demo); the router decides from what it could know at the arrival; cache_aware follows the prefix until the loads are
imbalanced; bad options name their field; the command line's --json gives each request its replica and branch."""
import json

import pytest

from engine import Engine
from engine.cli.commands import main
from engine.config import ROUTERS, FleetConfig
from engine.fleet import ReplicaFailed
from engine.report.metrics import lane_metrics
from engine.sched.router import ReplicaView, Router
from engine.spec import RequestSpec
from engine.workload.workload import CLI_LIMITS, Limits, WorkloadError, parse_workload
from tests.kit import ROOT
from tests.kit.faults import fail_from
from tests.kit.reference import PROMPTS, check_against_solo

SHARED = "You are a careful assistant. Answer in one short sentence and never use lists. " * 2


def fleet_lane(router: str, size: int = 2, **knobs) -> dict:
    return {"name": f"{size} x {router}", "policy": "continuous", "data_parallel_size": size, "router": router,
            **knobs}


def run_fleets(lm, requests: list[dict], lanes: list, **options):
    engine = Engine(lm)
    workload = engine.prepare(parse_workload({"name": "fleet", "requests": requests, "lanes": lanes, **options},
                                             CLI_LIMITS))
    run = engine.start(workload)
    run.run_to_end()
    return run


def check_routes(run, name: str) -> list:
    """Every request routed exactly once, to a replica that ran it; the routes, as the records carry them."""
    lane = run.lanes[name]
    routes = [route for r in lane.records for route in r.routes]
    assert sorted(route.request for route in routes) == sorted(s.id for s in run.workload.requests)
    for route in routes:
        ran = {c.request for r in lane.records if r.replicas[route.replica] is not None
               for c in r.replicas[route.replica].slots}
        assert route.request in ran and route.branch and len(route.loads) == len(route.matched) == len(lane.replicas)
    return routes


def test_every_router_keeps_solo_generate_tokens_on_the_tiny_model(tiny):
    requests = [{"id": f"R{i}", "prompt": (SHARED if i % 3 else "") + p, "max_new_tokens": 3 + (5 * i) % 9,
                 "arrival": i // 3, "session": f"s{i % 3}"} for i, p in enumerate(PROMPTS)]
    lanes = ["continuous", *(fleet_lane(r, 3 if r in ("least_loaded", "consistent_hash") else 2) for r in ROUTERS)]
    run = run_fleets(tiny, requests, lanes, slots=2, prefix_cache=True, kv_block_size=8)
    check_against_solo(tiny, run, tiny.eos_ids)
    for lane in lanes[1:]:
        routes = check_routes(run, lane["name"])
        assert {r.branch for r in routes} <= {"round_robin", "least_loaded", "power_of_two", "hash", "cache_hit",
                                              "load_balance", "low_match", "lowest_cost", "lowest_score", "tie"}
    assert [r.replica for r in check_routes(run, "2 x round_robin")] == [i % 2 for i in range(len(PROMPTS))]
    hashed = {r.request: r.replica for r in check_routes(run, "3 x consistent_hash")}
    assert len({hashed[f"R{i}"] for i in range(0, 8, 3)}) == 1  # one session, one replica


def test_a_timed_fleet_routes_each_arrival_by_the_loads_it_could_know_then():
    requests = [{"id": f"q{i}", "prompt": (SHARED if i % 4 else "Other words entirely. " * 8) + f"Question {i}?",
                 "max_new_tokens": 6 + i % 5, "arrival_ms": 30.0 * i} for i in range(16)]
    run = run_fleets(None, requests, ["continuous", fleet_lane("cache_aware"), fleet_lane("round_robin")], slots=2,
                     prefix_cache=True)
    for name in ("2 x cache_aware", "2 x round_robin"):
        lane, routes = run.lanes[name], check_routes(run, name)
        back = {rid: rec.start_ms + rec.ms for r in lane.records for rec in r.replicas if rec for rid in rec.returned}
        for n, route in enumerate(routes):  # in flight: sent earlier, its response not back by the arrival
            assert list(route.loads) == [sum(1 for earlier in routes[:n] if earlier.replica == i
                                             and back[earlier.request] > route.at_ms) for i in range(2)]
        stored = json.loads(json.dumps([r.to_dict() for r in lane.records]))
        m = lane_metrics(stored, run.workload)
        assert m == lane_metrics(lane.records, run.workload)
        parts = [lane_metrics(replica.records, run.workload) for replica in lane.replicas]
        cached, computed = sum(p["prompt_tokens_cached"] for p in parts), sum(p["prompt_tokens_computed"] for p in parts)
        assert m["prefix_cache_hit_rate"] == cached / (cached + computed) and m["tokens"] == sum(p["tokens"] for p in parts)
        assert {rid: (q["replica"], q["route"]) for rid, q in m["requests"].items()} == \
            {r.request: (r.replica, r.branch) for r in routes}
        assert m["prefix_hit_rate_available"] >= m["prefix_hit_rate_achieved"] > 0 and m["max_load_imbalance"] >= 1
        assert [len(r["load"]) for r in m["replicas"]] == [len(replica.records) for replica in lane.replicas]
    ca, rr = (lane_metrics(run.lanes[n].records, run.workload) for n in ("2 x cache_aware", "2 x round_robin"))
    assert ca["prefix_hit_rate_achieved"] > rr["prefix_hit_rate_achieved"]  # it follows the shared instructions


def views(loads: list[int]) -> list[ReplicaView]:
    return [ReplicaView(load, 0, load, 0.0, 0, 0) for load in loads]


def spec(rid: str, prompt: str) -> RequestSpec:
    return RequestSpec(rid, prompt, 4, prompt_ids=(1, 2, 3))


def test_cache_aware_follows_the_best_prefix_until_the_loads_are_imbalanced():
    router = Router(FleetConfig(2, "cache_aware", balance_abs_threshold=4), 16, ["a", "b"])
    assert router.route(spec("1", "hot prefix: one"), views([0, 0])).branch == "low_match"  # empty trees: least loaded
    hot = router.route(spec("2", "hot prefix: two"), views([1, 0]))
    assert (hot.replica, hot.branch) == (0, "cache_hit") and hot.scores[0] > 0.3
    assert router.route(spec("3", "hot prefix: six"), views([5, 1])).branch == "cache_hit"  # 5 - 1 is not > 4
    guard = router.route(spec("4", "hot prefix: ten"), views([6, 1]))  # 6 - 1 > 4 and 6 > 1.5 x 1
    assert (guard.replica, guard.branch) == (1, "load_balance")
    assert router.route(spec("5", "cold: nothing alike"), views([2, 2])).branch == "low_match"


def test_the_routers_scores_are_their_published_formulas():
    kv = Router(FleetConfig(2, "kv_aware", overlap_score_weight=2.0), 16, ["a", "b"])
    views_kv = [ReplicaView(0, 0, 1, 0.1, 10, 32), ReplicaView(0, 0, 0, 0.0, 0, 0)]
    request = RequestSpec("k", "x", 4, prompt_ids=tuple(range(48)))
    assert kv.route(request, views_kv).scores == (2.0 * 16 / 16 + 10 + 3, 2.0 * 48 / 16 + 0 + 3)  # 15 vs 9: b
    dp = Router(FleetConfig(2, "vllm_dp"), 16, ["a", "b"])
    busy = [ReplicaView(1, 3, 2, 0.75, 0, 0), ReplicaView(4, 0, 3, 0.2, 0, 0)]
    choice = dp.route(request, busy)
    assert choice.scores == (5 + 3 * 6.0 * 0.25, 4) and choice.replica == 1


@pytest.mark.parametrize("lane, field", [
    (fleet_lane("nearest"), "lanes[0].router"),
    (fleet_lane("round_robin", 5), "lanes[0].data_parallel_size"),
    ({"name": "one", "policy": "continuous", "router": "cache_aware"}, "lanes[0].router"),
    ({"name": "one", "policy": "continuous", "data_parallel_size": 1, "cache_threshold": 0.5}, "lanes[0].cache_threshold"),
    (fleet_lane("round_robin", cache_threshold=0.5), "lanes[0].cache_threshold"),
    (fleet_lane("cache_aware", cache_threshold=3), "lanes[0].cache_threshold"),
    ({**fleet_lane("round_robin"), "policy": "static"}, "lanes[0].data_parallel_size"),
])
def test_bad_fleet_options_name_the_field(lane, field):
    with pytest.raises(WorkloadError) as e:
        parse_workload({"lanes": [lane], "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}, CLI_LIMITS)
    assert e.value.field == field


def test_the_page_takes_a_fleet_and_a_server_with_fleets_off_refuses_one_by_name():
    obj = {"lanes": [fleet_lane("round_robin")], "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}
    assert parse_workload(obj, Limits()).lanes[0].name  # the page's limits: a fleet is drawn as sub-lanes
    with pytest.raises(WorkloadError, match="limits.fleets") as e:
        parse_workload(obj, Limits(fleets=False))
    assert e.value.field == "lanes[0].data_parallel_size"


def test_a_replica_that_fails_ends_the_run_with_an_error_naming_it():
    engine = Engine(None)
    workload = engine.prepare(parse_workload({"name": "fleet", "slots": 2, "lanes": [fleet_lane("round_robin")],
                                              "requests": [{"id": f"R{i}", "prompt": "Hi there.", "max_new_tokens": 6}
                                                           for i in range(4)]}, CLI_LIMITS))
    run = engine.start(workload)
    fleet = run.lanes["2 x round_robin"]
    fail_from(fleet.replicas[1], 3, "forced replica failure")
    with pytest.raises(ReplicaFailed, match=r"replica 1 \(2 x round_robin/1\) of fleet '2 x round_robin' failed in "
                                            r"fleet step 3: RuntimeError: forced replica failure"):
        run.run_to_end()
    assert len(fleet.records) == 2                        # the steps before it stand; none is half-written


def test_run_json_gives_every_request_its_replica_and_branch(tmp_path, capsys):
    workload = json.loads((ROOT / "demos" / "shared-instructions.json").read_text())
    workload["lanes"] = [{"name": "2 × cache-aware", "policy": "continuous", "prefix_cache": True,
                          "data_parallel_size": 2, "router": "cache_aware"}]
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(workload))
    assert main(["run", str(path), "--backend", "sim", "--json"]) == 0
    lane = json.loads(capsys.readouterr().out)["lanes"]["2 × cache-aware"]
    assert all(q["replica"] in (0, 1) and q["route"] for q in lane["requests"].values())
    assert lane["prefix_cache_hit_rate"] > 0 and lane["prefix_hit_rate_available"] >= lane["prefix_hit_rate_achieved"]


@pytest.mark.model
def test_smollm2_fleet_on_the_mixed_demo_keeps_solo_generate_tokens(smol):
    workload = json.loads((ROOT / "demos" / "mixed.json").read_text())
    run = run_fleets(smol, workload["requests"], ["continuous", {**fleet_lane("cache_aware"), "prefix_cache": True}],
                     slots=workload["slots"])
    check_against_solo(smol, run, smol.eos_ids)
    check_routes(run, "2 x cache_aware")


def test_the_cli_report_says_each_fleets_imbalance_and_replicas(capsys):
    """`engine run` (text): a block per fleet with its imbalance, its hits on offer and taken, and each replica's
    requests, steps, mean TTFT and peak load, from the fleet's metrics; goodput in the lane table as for any lane."""
    from engine.cli.commands import main
    assert main(["run", "demos/fleet-herding.json", "--backend", "sim"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "fleet guard 64: load imbalance mean 8.60 / max 16; prefix hits available 85% / achieved 85%" in out
    assert "  guard 64/0: 16 requests, 65 steps, mean TTFT 2331 ms, load at most 16" in out
    assert "  guard 64/1: 0 requests, 0 steps, mean TTFT - ms, load at most 0" in out  # the herd's twin never stepped
    assert any(line.startswith("  guard 4/1: 7 requests") for line in out)
    assert main(["run", "demos/fleet-one-vs-two.json", "--backend", "sim"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "SLO: TTFT <= 500 ms, TPOT <= 100 ms - met 4 slots 3/16, 8 slots 2/16, 2 × 4 12/16" in out
    assert [line for line in out if line.startswith("fleet ")] == [
        "fleet 2 × 4: load imbalance mean 0.97 / max 3; prefix hits available 0% / achieved 0%"]
