"""Load on loopback: N python-socketio clients connect at once, each submits a preset (retrying when the
server says busy or rate-limited) and watches its neighbour's run; then one report.

    python scripts/load.py --clients 50                 # starts `python -m app` on a free port itself
    python scripts/load.py --clients 50 --url http://127.0.0.1:5000 --pid 1234

It reports runs completed, ticks lost or out of order (every run every client saw must arrive as
t = 1, 2, 3 ... with none missing), p50/p95 of the time from an engine step (the tick's `sent_at`) to
the tick arriving, and the server's memory before, at peak and after. Not a test of speed: a report.
"""
import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
from engine.report.metrics import percentile  # noqa: E402  (the engine's nearest-rank definition, for every p50/p95)
from tests.kit.server import EventClient, live_server  # noqa: E402

PRESETS = ("mixed", "same", "one-long")
RETRY = {"busy": (3.0, 8.0), "rate_limited": (10.0, 20.0)}  # seconds to wait before submitting again


class LoadClient:
    """One simulated student: submit a preset until accepted, watch the neighbour's run, wait for both."""

    def __init__(self, index: int, url: str, workload: dict, board: dict, board_changed: threading.Condition):
        self.index, self.url, self.workload = index, url, workload
        self.board, self.board_changed = board, board_changed   # client index -> its accepted run id
        self.client: EventClient | None = None
        self.run_id: str | None = None
        self.watched: str | None = None
        self.retries = {"busy": 0, "rate_limited": 0}
        self.problems: list[str] = []

    def connect(self) -> None:
        try:  # a loaded server may take a while to accept 50 connections at once
            self.client = EventClient(self.url, wait_timeout=60)
        except Exception as e:  # a client that cannot connect is a finding of the report
            self.problems.append(f"could not connect: {type(e).__name__}: {e}")

    def submit_until_accepted(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            seen = len(self.client.named("run_error")), len(self.client.named("run_queued"))
            self.client.emit("submit", {"workload": self.workload, "lanes": ["static", "continuous"]})
            with self.client.changed:
                self.client.changed.wait_for(lambda: (len(self.client.named("run_error")),
                                                      len(self.client.named("run_queued"))) != seen, 60)
            if len(self.client.named("run_queued")) > seen[1]:
                self.run_id = self.client.named("run_queued")[-1]["run_id"]
                with self.board_changed:
                    self.board[self.index] = self.run_id
                    self.board_changed.notify_all()
                return
            error = self.client.named("run_error")[-1] if len(self.client.named("run_error")) > seen[0] else None
            if error is None or error["code"] not in RETRY:
                self.problems.append(f"submit refused: {error}")
                return
            self.retries[error["code"]] += 1
            time.sleep(random.uniform(*RETRY[error["code"]]))
        self.problems.append("never accepted before the deadline")

    def watch_neighbour(self, neighbour: int, deadline: float) -> None:
        with self.board_changed:
            if not self.board_changed.wait_for(lambda: neighbour in self.board, max(0.0, deadline - time.monotonic())):
                self.problems.append(f"client {neighbour} never had a run to watch")
                return
            self.watched = self.board[neighbour]
        self.client.emit("watch", {"run_id": self.watched})

    def wait_done(self, deadline: float) -> None:
        for run_id in filter(None, (self.run_id, self.watched)):
            try:
                self.client.wait_for("run_finished", run_id, timeout=max(0.0, deadline - time.monotonic()))
            except AssertionError:
                errors = self.client.named("run_error", run_id)
                self.problems.append(f"run {run_id} did not finish: {errors[-1]['message'] if errors else 'timeout'}")

    def play(self, neighbour: int | None, start: threading.Barrier, deadline: float) -> None:
        try:
            start.wait()
            if self.client is None:
                return
            self.submit_until_accepted(deadline)
            if neighbour is not None:
                self.watch_neighbour(neighbour, deadline)
            self.wait_done(deadline)
        except Exception as e:  # one broken client is a finding of the report, not a crash of the script
            self.problems.append(f"{type(e).__name__}: {e}")

    def check(self) -> dict:
        """Per run this client saw: ticks lost and out of order; latencies of live ticks."""
        lost = disorder = ticks = replayed = 0
        latencies = []
        if self.client is None:
            return {"lost": 0, "disorder": 0, "ticks": 0, "replayed": 0, "latencies": []}
        with self.client.changed:
            events = list(zip(self.client.events, self.client.arrived_at))
        for run_id in filter(None, (self.run_id, self.watched)):
            finished = [p for (n, p), _ in events if n == "run_finished" and p["run_id"] == run_id]
            got = [(p, at) for (n, p), at in events if n == "tick" and p["run_id"] == run_id]
            steps = max(m["steps"] for m in finished[0]["metrics"].values()) if finished else len(got)
            ts = [p["t"] for p, _ in got]
            lost += len(set(range(1, steps + 1)) - set(ts))
            disorder += sum(1 for i, t in enumerate(ts) if t != i + 1)
            ticks += len(got)
            replayed += sum(1 for p, _ in got if p.get("replay"))
            latencies += [at - p["sent_at"] for p, at in got if "sent_at" in p and not p.get("replay")]
        return {"lost": lost, "disorder": disorder, "ticks": ticks, "replayed": replayed, "latencies": latencies}


def run_load(url: str, clients: int, pid: int | None = None, presets: tuple[str, ...] = PRESETS,
             timeout_s: float = 3600) -> dict:
    workloads = {name: json.loads((ROOT / "demos" / f"{name}.json").read_text()) for name in presets}
    server = psutil.Process(pid) if pid else None
    rss = {"before": server.memory_info().rss if server else None, "peak": 0}
    board, board_changed = {}, threading.Condition()
    players = [LoadClient(i, url, workloads[presets[i % len(presets)]], board, board_changed) for i in range(clients)]
    t0 = time.monotonic()
    connectors = [threading.Thread(target=p.connect) for p in players]  # every client connects at once
    for t in connectors:
        t.start()
    for t in connectors:
        t.join()
    deadline, start = time.monotonic() + timeout_s, threading.Barrier(clients)
    threads = [threading.Thread(target=p.play, args=((i + 1) % clients if clients > 1 else None, start, deadline))
               for i, p in enumerate(players)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if server:
            rss["peak"] = max(rss["peak"], server.memory_info().rss)
        time.sleep(0.5)
    wall_s = time.monotonic() - t0
    checks = [p.check() for p in players]
    for p in filter(lambda p: p.client is not None, players):
        p.client.close()
    latencies = [x for c in checks for x in c["latencies"]]
    completed = sum(1 for p in players if p.run_id and p.client.named("run_finished", p.run_id))
    rss["after"] = server.memory_info().rss if server else None
    return {"clients": clients, "runs_accepted": sum(1 for p in players if p.run_id), "runs_completed": completed,
            "watched_completed": sum(1 for p in players if p.watched and p.client.named("run_finished", p.watched)),
            "busy_retries": sum(p.retries["busy"] for p in players),
            "rate_limited_retries": sum(p.retries["rate_limited"] for p in players),
            "ticks_received": sum(c["ticks"] for c in checks), "ticks_replayed": sum(c["replayed"] for c in checks),
            "ticks_lost": sum(c["lost"] for c in checks), "ticks_out_of_order": sum(c["disorder"] for c in checks),
            "latency_ms": {"n": len(latencies), "p50": _ms(percentile(latencies, 50)),
                           "p95": _ms(percentile(latencies, 95)), "max": _ms(max(latencies, default=None))},
            "rss_mib": {k: None if v is None else round(v / 2 ** 20, 1) for k, v in rss.items()},
            "wall_s": round(wall_s, 1), "problems": [f"client {p.index}: {m}" for p in players for m in p.problems]}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def format_report(r: dict) -> str:
    lat, rss = r["latency_ms"], r["rss_mib"]
    lines = [f"clients {r['clients']}: runs accepted {r['runs_accepted']}, completed {r['runs_completed']}, "
             f"neighbour runs watched to the end {r['watched_completed']}",
             f"retries after 'busy' {r['busy_retries']}, after 'rate limited' {r['rate_limited_retries']}",
             f"ticks received {r['ticks_received']} (of which replayed backlog {r['ticks_replayed']}): "
             f"lost {r['ticks_lost']}, out of order {r['ticks_out_of_order']}",
             f"engine step -> tick arrival (live ticks, n={lat['n']}): p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
             f"max {lat['max']} ms",
             f"server RSS: before {rss['before']} MiB, peak {rss['peak']} MiB, after {rss['after']} MiB",
             f"wall time {r['wall_s']} s"]
    return "\n".join(lines + [f"problem: {m}" for m in r["problems"][:20]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--url", help="an already running server (default: start one on a free port)")
    parser.add_argument("--pid", type=int, help="that server's process id, for its memory figures")
    parser.add_argument("--presets", default=",".join(PRESETS), help="comma-separated demo names")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before unfinished clients give up")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    presets = tuple(p.strip() for p in args.presets.split(",") if p.strip())
    if args.url:
        report = run_load(args.url, args.clients, args.pid, presets, args.timeout)
    else:
        with live_server() as url:
            report = run_load(url, args.clients, url.process.pid, presets, args.timeout)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    clean = report["runs_completed"] == args.clients and not report["ticks_lost"] and not report["ticks_out_of_order"]
    return 0 if clean and not report["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
