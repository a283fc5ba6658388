"""The lane's router against the real vllm-router: the same requests, the same replica for each.

    .venv/bin/python -m scripts.router_fidelity [--router-venv .venv-router] [--policies round_robin ...]

Starts two Batch Lanes servers (`python -m app --backend sim --pace 1`, each its own engine), then for each policy the
real `vllm-router` (in its own virtualenv: `make router` installs vllm-router 0.1.17 into .venv-router) in front of
them, and sends the requests one after another through its `/v1/completions` (a session's turns carry
`X-Session-ID`). Before each request it reads the router's own view: its worker order and each worker's load
(`GET /workers`); after, which worker the router sent it to (its `vllm_router_processed_requests_total`). The lane's
router (engine/sched/router.py) routes the same request over the same worker URLs, in the router's order, with those
loads. A request marked `hold` is streamed and left open, so it stays in flight (the paced simulator takes ~60 ms a
token) and the loads differ: cache_aware's low-match branch then picks the less loaded worker. Loads stay balanced
(at most 2 apart, the guard needs 64). Prints, per policy, the real worker and ours for every request; exits 1 if
any differs. tests/engine/peers/test_router_fidelity.py runs the same comparison in `make test`.

cache_aware is compared on the text 0.1.17 matches, which is not the prompt: its tree key for a completion depends
only on the prompt's length, floor(characters / 4) + 1 units alike for every prompt (docs/fleets.md, "Against the
real router"); `routed_text` builds that key, and the lane's router matches it as it matches a prompt.
"""
import argparse
import http.client
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from engine.config import FleetConfig
from engine.sched.router import ReplicaView, Router
from engine.spec import RequestSpec
from scripts.fleet import ROOT, get, router_binary, start_servers, stop, wait_for

SHARED = ["You are a patient tutor for a class on how computers work. Answer in two sentences. ",
          "You translate short English phrases into French and nothing else. "]
HOLD_TOKENS = 100  # a held request's tokens: ~6 s on the paced simulator, longer than a whole sequence


@dataclass(frozen=True)
class Item:
    prompt: str
    session: str | None = None  # sent as X-Session-ID (consistent_hash's key)
    hold: bool = False          # stream it and leave it open: in flight until the sequence ends


def sessions(n: int) -> list[Item]:
    """Six sessions whose turns grow (shared prefixes), and prompts that share nothing."""
    out = []
    for i in range(n):
        if i % 4 == 3:
            out.append(Item(f"Unrelated question number {i}: what is {i} times {i + 1}?"))
        else:
            s = i % 6
            turns = " ".join(f"Turn {t}: tell me more about topic {s}." for t in range(i // 6 + 1))
            out.append(Item(SHARED[s % 2] + f"Session {s}. " + turns, f"session-{s}"))
    return out


def cache_aware_sequence() -> list[Item]:
    """Prompts whose lengths walk cache_aware through its balanced branches on 0.1.17's length key: a first low match
    (equal loads, the first worker), hits on the only holder, a low match to the less loaded worker, a hit that both
    workers hold (the tree's tenant: the first to hold it), and low matches on unequal and on equal loads."""
    lengths = [(40, True), (40, False), (200, False), (100, True), (40, False), (800, False), (800, True),
               (2000, False), (1200, False), (4000, False), (400, False), (40, False)]
    words = " ".join(f"word{i}" for i in range(1000))
    return [Item(words[:n], hold=hold) for n, hold in lengths]


def routed_text(prompt: str) -> str:
    """The text vllm-router 0.1.17's cache_aware tree matches for a completion: floor(characters / 4) + 1 units, the
    same unit whatever the prompt says (measured from its decision log: docs/fleets.md)."""
    return "\x1f" * (len(prompt) // 4 + 1)


def router_view(url: str) -> tuple[list[str], dict[str, int]]:
    """The router's worker order and each worker's load (requests it sent that have not come back)."""
    workers = json.loads(get(f"{url}/workers"))["workers"]
    return [w["url"] for w in workers], {w["url"]: int(w["load"]) for w in workers}


def processed(metrics_url: str) -> dict[str, float]:
    """Requests the router has sent to each worker, from its Prometheus counter."""
    out = {}
    for line in get(metrics_url).decode().splitlines():
        if line.startswith("vllm_router_processed_requests_total{"):
            out[line.split('worker="', 1)[1].split('"', 1)[0]] = float(line.rsplit(" ", 1)[1])
    return out


def send(port: int, model: str, item: Item) -> http.client.HTTPConnection | None:
    """POST one completion through the router; a held one is streamed and its connection returned unread."""
    body = {"model": model, "prompt": item.prompt, "max_tokens": HOLD_TOKENS if item.hold else 2, "stream": item.hold}
    headers = {"Content-Type": "application/json", **({"X-Session-ID": item.session} if item.session else {})}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body), headers)
    response = conn.getresponse()
    assert response.status == 200, f"the router answered {response.status}: {response.read()[:200]!r}"
    if item.hold:
        return conn
    response.read()
    conn.close()
    return None


def start_router(binary: Path, urls: list[str], policy: str, port: int) -> subprocess.Popen:
    return subprocess.Popen([str(binary), "--worker-urls", *urls, "--policy", policy, "--port", str(port),
                             "--prometheus-port", str(port + 1), "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def compare(binary: Path, urls: list[str], policy: str, items: list[Item], port: int) -> tuple[list[str], list[str], list[str]]:
    """The worker URL the real router picked for each item, the lane's router's pick, and the lane's branch."""
    router = start_router(binary, urls, policy, port)
    held = []
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/health", 60, router)
        model = json.loads(get(f"{urls[0]}/v1/models"))["data"][0]["id"]
        order, _ = router_view(base)
        ours = Router(FleetConfig(2, policy), 16, order)
        real, mine, branches = [], [], []
        for i, item in enumerate(items):
            _, loads = router_view(base)
            before = processed(f"http://127.0.0.1:{port + 1}/metrics")
            held.append(send(port, model, item))
            after = processed(f"http://127.0.0.1:{port + 1}/metrics")
            real.append(next(u for u in order if after.get(u, 0) - before.get(u, 0) == 1))
            text = routed_text(item.prompt) if policy == "cache_aware" else item.prompt
            views = [ReplicaView(loads[u], 0, 0, 0.0, 0, 0) for u in order]
            choice = ours.route(RequestSpec(f"r{i}", text, 2, session=item.session, prompt_ids=(0,)), views)
            mine.append(order[choice.replica])
            branches.append(choice.branch)
        return real, mine, branches
    finally:
        for conn in held:
            if conn is not None:
                conn.close()
        stop([router])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--router-venv", default=str(ROOT / ".venv-router"), help="where `make router` installs it")
    p.add_argument("--policies", nargs="+", default=["round_robin", "consistent_hash", "cache_aware"])
    p.add_argument("-n", type=int, default=24, help="requests for round_robin and consistent_hash")
    p.add_argument("--port", type=int, default=18100)
    args = p.parse_args()
    binary = router_binary(args.router_venv)
    urls, procs = start_servers(2, args.port, "sim", args=("--pace", "1"))
    failed = False
    try:
        for url, proc in zip(urls, procs):
            wait_for(f"{url}/health", 120, proc)
        for policy in args.policies:
            items = cache_aware_sequence() if policy == "cache_aware" else sessions(args.n)
            real, mine, branches = compare(binary, urls, policy, items, args.port + 50)
            failed |= real != mine
            print(f"{policy:16} {'same' if real == mine else 'DIFFERENT'} for {sum(a == b for a, b in zip(real, mine))} "
                  f"of {len(real)}\n  real: {[urls.index(u) for u in real]}\n  ours: {[urls.index(u) for u in mine]}"
                  f"\n  branches: {branches}")
    finally:
        stop(procs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
