"""A small run of scripts/load.py against `python -m app` on the real model: every client's run completes
and every run any client watched arrived whole and in order (t = 1, 2, 3 ...). No speed is asserted."""
import pytest

from scripts.load import format_report, run_load

pytestmark = pytest.mark.model


def test_clients_submitting_and_watching_each_other_lose_no_tick(model_server):
    report = run_load(model_server, clients=3, pid=model_server.process.pid, presets=("same", "mixed", "one-long"))
    print(format_report(report))
    assert report["problems"] == []
    assert report["runs_completed"] == report["watched_completed"] == 3
    assert report["ticks_lost"] == 0 and report["ticks_out_of_order"] == 0
    # each client saw its own run and its neighbour's: 8 + 15 + 14 ticks, twice
    assert report["ticks_received"] == 2 * (8 + 15 + 14)
    assert report["latency_ms"]["n"] + report["ticks_replayed"] == report["ticks_received"]
    assert report["rss_mib"]["before"] > 0 and report["rss_mib"]["after"] > 0
