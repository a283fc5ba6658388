"""One spectator of a scale-out load run (scripts/load_scale.py): an asyncio Socket.IO client, WebSocket only,
that records every run event it gets per run id, and says whether it saw its run whole (every tick once, live
or replayed) with the submitter's metrics. Knows the protocol's events, nothing of the processes."""
import asyncio
import time
from collections import Counter, defaultdict

from scripts.scale_procs import ScaleError

LANES = ["static", "continuous"]
CONNECT_RETRIES = 2      # a failed connect is tried this many more times


class Watcher:
    """One asyncio Socket.IO client (WebSocket only) that records every run event it gets, per run id."""

    def __init__(self, index: int, url: str, web: str):
        self.index, self.url, self.web = index, url, web
        self.sio = None
        self.connected = False
        self.connect_errors: list[str] = []
        self.run_id: str | None = None          # the run this client waits for
        self.ticks: dict[str, Counter] = defaultdict(Counter)
        self.live = Counter()                   # run id -> live ticks
        self.replayed = Counter()               # run id -> replayed ticks
        self.latencies: list[float] = []        # receive - sent_at of live ticks of its run, seconds
        self.started = Counter()
        self.finished: dict[str, list[dict]] = defaultdict(list)
        self.queued: list[dict] = []
        self.errors: list[dict] = []
        self.dropped: str | None = None          # why the connection ended before the run did
        self.closing = False                    # this script is disconnecting it
        self.done = asyncio.Event()
        self.joined = asyncio.Event()           # the server answered its watch (or submit): queued, started, ...
        self.ticked = asyncio.Event()           # the first tick of its run arrived

    async def connect(self, retries: int) -> None:
        import socketio
        for attempt in range(retries + 1):
            self.sio = sio = socketio.AsyncClient(reconnection=False, handle_sigint=False)
            for name in ("run_queued", "run_started", "tick", "run_finished", "run_error", "disconnect"):
                sio.on(name, getattr(self, f"_on_{name}"))
            try:
                await sio.connect(self.url, transports=["websocket"], wait_timeout=30)
            except Exception as e:  # a client that cannot connect is a finding of the report
                self.connect_errors.append(f"{type(e).__name__}: {e}")
                await self.close()
                if attempt < retries:
                    await asyncio.sleep(1 + attempt)
                continue
            self.connected = True
            return

    def _on_run_queued(self, p: dict) -> None:
        self.queued.append(p)
        if self.run_id is None:  # the submitter: its run from now on (spectators are told theirs before `watch`)
            self.run_id = p.get("run_id")
        if p.get("run_id") == self.run_id:
            self.joined.set()

    def _on_run_started(self, p: dict) -> None:
        self.started[p.get("run_id")] += 1
        if p.get("run_id") == self.run_id:
            self.joined.set()

    def _on_tick(self, p: dict) -> None:
        at = time.time()
        run_id = p.get("run_id")
        self.ticks[run_id][p.get("t")] += 1
        if run_id == self.run_id:
            self.joined.set()
            self.ticked.set()
        if p.get("replay"):
            self.replayed[run_id] += 1
        else:
            self.live[run_id] += 1
            if run_id == self.run_id and isinstance(p.get("sent_at"), (int, float)):
                self.latencies.append(at - p["sent_at"])

    def _on_run_finished(self, p: dict) -> None:
        self.finished[p.get("run_id")].append(p.get("metrics"))
        if p.get("run_id") == self.run_id:
            self.joined.set()
            self.done.set()

    def _on_run_error(self, p: dict) -> None:
        self.errors.append(p)
        if self.run_id is not None and p.get("run_id") in (None, self.run_id):
            self.joined.set()
            self.done.set()

    def _on_disconnect(self, reason=None) -> None:
        if not self.done.is_set() and not self.closing:
            self.dropped = str(reason)
            self.joined.set()
            self.done.set()

    async def submit(self, workload: dict, timeout: float = 60) -> str:
        await self.sio.emit("submit", {"workload": workload, "lanes": LANES})
        deadline = time.monotonic() + timeout
        while not self.queued:
            if self.errors:
                raise ScaleError(f"the submit was refused: {self.errors[-1]}")
            if time.monotonic() > deadline or self.dropped:
                raise ScaleError(f"no run_queued within {timeout:.0f} s (disconnected: {self.dropped})")
            await asyncio.sleep(0.01)
        self.run_id = self.queued[0]["run_id"]
        if self.finished.get(self.run_id):  # a run faster than this loop
            self.done.set()
        return self.run_id

    async def watch(self, run_id: str) -> None:
        self.run_id = run_id
        await self.sio.emit("watch", {"run_id": run_id})

    async def cancel(self) -> None:
        if self.sio is not None and self.sio.connected and self.run_id:
            await self.sio.emit("cancel", {"run_id": self.run_id})

    async def close(self) -> None:
        """Disconnect, and close the HTTP session of a connect that failed or was interrupted half-way."""
        if self.sio is None:
            return
        self.closing = True
        try:
            await asyncio.wait_for(self.sio.disconnect(), 10)
        except Exception:
            pass
        http = getattr(self.sio.eio, "http", None)
        if http is not None and not http.closed:
            try:
                await http.close()
            except Exception:
                pass

    def check(self, steps: int | None, metrics: dict | None) -> dict:
        """Its run's ticks against t = 1..steps: missing, duplicated and out-of-range ones; metrics equal?"""
        got = self.ticks.get(self.run_id, Counter()) if self.run_id else Counter()
        finished = self.finished.get(self.run_id, []) if self.run_id else []
        if steps is None and finished and isinstance(finished[0], dict):
            steps = steps_of(finished[0])
        expected = set(range(1, (steps or 0) + 1))
        missing = len(expected - set(got))
        duplicated = sum(n - 1 for t, n in got.items() if t in expected and n > 1)
        unexpected = sum(n for t, n in got.items() if t not in expected)
        complete = (self.connected and bool(finished) and steps is not None and not missing and not duplicated
                    and not unexpected)
        live, replayed = self.live[self.run_id], self.replayed[self.run_id]
        return {"complete": complete, "finished": bool(finished), "finished_twice": len(finished) > 1,
                "metrics_equal": bool(finished) and metrics is not None and finished[0] == metrics,
                "missing": missing, "duplicated": duplicated, "unexpected": unexpected,
                "live": live, "replayed": replayed,
                "joined": None if not got else "before_first_tick" if not replayed else "mid_run" if live
                else "after_last_tick"}


def steps_of(metrics: dict) -> int | None:
    steps = [m.get("steps") for m in metrics.values() if isinstance(m, dict) and isinstance(m.get("steps"), int)]
    return max(steps) if steps else None
