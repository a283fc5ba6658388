"""Fidelity with the real router: vllm-router 0.1.17 in front of two Batch Lanes servers (the paced simulator) and the
fleet's router (engine/sched/router.py) pick the same worker for every request of the same sequence, on the policies
whose choice does not depend on timing: round_robin, consistent_hash (sessions by X-Session-ID, prompts by their
text), and cache_aware while the loads are balanced (requests held open make them differ by one or two; compared on
the text 0.1.17's tree matches, which depends only on the prompt's length: docs/fleets.md). The lane's router is
given what the real one knew at each request: its worker order and loads, read from its /workers
(scripts/router_fidelity.py). Needs `make router` (.venv-router): skipped without it, a failure under CI=true or
BATCH_LANES_REQUIRE_ROUTER=1. ~30 s: two server starts, three router starts, 44 requests."""
import os

import pytest

from scripts.fleet import ROOT, start_servers, stop, wait_for
from scripts.router_fidelity import cache_aware_sequence, compare, sessions

pytestmark = pytest.mark.slow
BINARY = ROOT / ".venv-router" / "bin" / "vllm-router"
PORT = 18300  # the servers on 18300-18301, each router on 18350 (+1: its metrics)


@pytest.fixture(scope="module")
def servers():
    if not BINARY.exists():
        why = f"the real router is missing ({BINARY}): run `make router`"
        if os.environ.get("CI") == "true" or os.environ.get("BATCH_LANES_REQUIRE_ROUTER") == "1":
            pytest.fail(f"{why} (CI=true / BATCH_LANES_REQUIRE_ROUTER=1)")
        pytest.skip(why)
    urls, procs = start_servers(2, PORT, "sim", args=("--pace", "1"))
    try:
        for url, proc in zip(urls, procs):
            wait_for(f"{url}/health", 120, proc)
        yield urls
    finally:
        stop(procs)


@pytest.mark.parametrize("policy", ["round_robin", "consistent_hash"])
def test_the_lane_router_picks_the_real_routers_worker_for_every_request(servers, policy):
    real, ours, _ = compare(BINARY, servers, policy, sessions(16), PORT + 50)
    assert ours == real
    assert set(real) == set(servers)  # both workers took requests: the comparison is not one worker's


def test_cache_aware_picks_the_real_routers_worker_while_the_loads_are_balanced(servers):
    real, ours, branches = compare(BINARY, servers, "cache_aware", cache_aware_sequence(), PORT + 50)
    assert ours == real
    assert set(real) == set(servers)
    assert {"cache_hit", "low_match"} <= set(branches) and "load_balance" not in branches
