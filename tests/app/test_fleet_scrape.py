"""What the fleet view reads (app/live/fleet.py) when parts of the fleet are not there, and what the fleet script says
without its router: no server, no browser, real sockets to ports nothing listens on. Well under a second."""
import time

import pytest

from app.live.fleet import TIMEOUT_S, FleetScrape, cache_counters, trimmed
from scripts.fleet import router_binary
from tests.kit.server import free_port


def test_a_fleet_with_nothing_listening_reads_as_every_part_down_and_why_without_waiting():
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    router = f"http://127.0.0.1:{free_port()}"
    t = time.monotonic()
    snap = FleetScrape(urls, router, f"{router}/metrics", "round_robin").snapshot()
    assert time.monotonic() - t < TIMEOUT_S
    assert [(r["url"], r["up"], r["error"], r["live"]) for r in snap["replicas"]] == [
        (url, False, "connection refused", None) for url in urls]
    assert (snap["router"]["up"], snap["router"]["error"], snap["router"]["samples"]) == (False, "connection refused", [])


def test_a_replicas_cache_counters_are_summed_over_engines_under_either_prefix():
    text = "\n".join([
        "# TYPE batch_lanes:prefix_cache_queries counter",
        'batch_lanes:prefix_cache_queries_total{engine="0",model_name="m"} 200.0',
        'batch_lanes:prefix_cache_queries_total{engine="1",model_name="m"} 100.0',
        "# TYPE batch_lanes:prefix_cache_hits counter",
        'batch_lanes:prefix_cache_hits_total{engine="0",model_name="m"} 48.0',
        "# TYPE vllm:request_success counter",
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 3.0',
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 2.0', ""])
    assert cache_counters(text) == {"prefix_cache_queries": 300.0, "prefix_cache_hits": 48.0, "requests": 5.0}


def test_a_replicas_lane_keeps_only_the_steps_that_end_inside_the_window():
    live = {"now_ms": 100_000, "records": [{"start_ms": 30_000, "ms": 4_000}, {"start_ms": 34_000, "ms": 2_000},
                                           {"start_ms": 99_000, "ms": 50}]}
    assert [r["start_ms"] for r in trimmed(live, 65_000)["records"]] == [34_000, 99_000]


def test_the_fleet_script_without_its_router_names_the_command_that_installs_it(tmp_path):
    with pytest.raises(SystemExit) as stopped:
        router_binary(str(tmp_path / "no-venv"))
    assert "`make router` installs it" in str(stopped.value)
