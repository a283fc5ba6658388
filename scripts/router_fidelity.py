"""The lane's router against the real vllm-router: the same requests, one at a time, the same replica for each.

    .venv/bin/python -m scripts.router_fidelity [--router-venv /work/venv-router] [--policies round_robin ...]

Starts two Batch Lanes servers (`python -m app --backend sim`, each its own engine), then for each policy the real
`vllm-router` (in its own virtualenv: `make router` installs vllm-router 0.1.17 into
.venv-router) in front of them, sends the requests one after another through its `/v1/completions` (a
session's turns carry `X-Session-ID`), and reads which server answered each from the servers' own `/metrics`
(`request_success` counts). The lane's router (engine/sched/router.py) routes the same sequence over the same worker
URLs with every load at 0, since each request came back before the next was sent: cache_aware stays in its balanced
branches. Prints, per policy, the real replica and ours for every request; exits 1 if any differs. Not in CI:
docs/fleets.md says what it found (round_robin and consistent_hash agree; 0.1.17's cache_aware does not match
the prompt's text, so it is not compared by default).
"""
import argparse
import json
import sys
import urllib.request

from engine.config import FleetConfig
from engine.sched.router import ReplicaView, Router
from engine.spec import RequestSpec
from scripts.fleet import ROOT, get, router_binary, start_router, start_servers, stop, wait_for

SHARED = ["You are a patient tutor for a class on how computers work. Answer in two sentences. ",
          "You translate short English phrases into French and nothing else. "]


def requests(n: int) -> list[tuple[str, str | None]]:
    """(prompt, session): six sessions whose turns grow (shared prefixes), and prompts that share nothing."""
    out = []
    for i in range(n):
        if i % 4 == 3:
            out.append((f"Unrelated question number {i}: what is {i} times {i + 1}?", None))
        else:
            s = i % 6
            turns = " ".join(f"Turn {t}: tell me more about topic {s}." for t in range(i // 6 + 1))
            out.append((SHARED[s % 2] + f"Session {s}. " + turns, f"session-{s}"))
    return out


def answered(url: str) -> float:
    """The requests a server has answered: the sum of its request_success counters."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in get(f"{url}/metrics").decode().splitlines()
               if "request_success_total" in line and not line.startswith("#"))


def post(url: str, body: dict, session: str | None) -> None:
    headers = {"Content-Type": "application/json", **({"X-Session-ID": session} if session else {})}
    urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), headers), timeout=60).read()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--router-venv", default=str(ROOT / ".venv-router"), help="where `make router` installs it")
    p.add_argument("--policies", nargs="+", default=["round_robin", "consistent_hash"],
                   help="cache_aware too, to see what docs/fleets.md reports of it: 0.1.17 does not match prompts")
    p.add_argument("-n", type=int, default=24)
    p.add_argument("--port", type=int, default=18100)
    args = p.parse_args()
    binary = router_binary(args.router_venv)
    urls, procs = start_servers(2, args.port, "sim")
    failed = False
    try:
        for url, proc in zip(urls, procs):
            wait_for(f"{url}/health", 120, proc)
        model = json.loads(get(f"{urls[0]}/v1/models"))["data"][0]["id"]
        sequence = requests(args.n)
        for policy in args.policies:
            port = args.port + 50
            router = start_router(binary, urls, policy, port)
            try:
                wait_for(f"http://127.0.0.1:{port}/health", 60, router)
                ours = Router(FleetConfig(2, policy), 16, urls)
                idle = [ReplicaView(0, 0, 0, 0.0, 0, 0)] * 2
                real, mine = [], []
                for i, (prompt, session) in enumerate(sequence):
                    session = session if policy != "cache_aware" else None
                    before = [answered(u) for u in urls]
                    post(f"http://127.0.0.1:{port}/v1/completions", {"model": model, "prompt": prompt, "max_tokens": 2},
                         session)
                    real.append([a - b for a, b in zip([answered(u) for u in urls], before)].index(1.0))
                    mine.append(ours.route(RequestSpec(f"r{i}", prompt, 2, session=session, prompt_ids=(0,)), idle).replica)
                failed |= real != mine
                print(f"{policy:16} {'same' if real == mine else 'DIFFERENT'}\n  real: {real}\n  ours: {mine}")
            finally:
                stop([router])
    finally:
        stop(procs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
