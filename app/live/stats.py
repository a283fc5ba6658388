"""The live lane's stats line, every STATS_EVERY_S while it is busy, as vLLM's server logs its throughput:

    live: prompt 312.4 tokens/s, generation 48.9 tokens/s, running 6, waiting 2, KV 41.2%, prefix cache hits 12.0%

Read from the lane's /metrics (app.live.prom: its running totals and the gauges' load), so the line and a scrape
agree; an idle lane logs nothing. This module knows LiveMetrics, nothing of the engine.
"""
import logging
import time

log = logging.getLogger("batch_lanes.stats")
STATS_EVERY_S = 10.0


class StatsLine:
    def __init__(self, metrics):
        self.metrics = metrics
        self.last, self.at = dict(metrics.totals), time.monotonic()

    def line(self) -> str | None:
        """The line since the last call, or None if the lane was idle all along."""
        m = self.metrics
        load = m.load() if m.load is not None else {"running": 0, "waiting": 0, "kv_used": 0, "kv_capacity": 1}
        now, totals = time.monotonic(), dict(m.totals)
        d = {k: totals[k] - self.last.get(k, 0) for k in totals}
        seconds, self.last, self.at = max(now - self.at, 1e-9), totals, now
        if not (load["running"] or load["waiting"] or d["prompt"] or d["generation"]):
            return None
        hits = f"{100 * d['cache_hits'] / d['cache_queries']:.1f}%" if d["cache_queries"] else "-"
        return (f"live: prompt {d['prompt'] / seconds:.1f} tokens/s, generation {d['generation'] / seconds:.1f} "
                f"tokens/s, running {load['running']}, waiting {load['waiting']}, "
                f"KV {100 * load['kv_used'] / max(1, load['kv_capacity']):.1f}%, prefix cache hits {hits}")

    def tick(self) -> None:
        line = self.line()
        if line:
            log.info(line)

    def run(self, sleep, stopping) -> None:
        """Log a line every STATS_EVERY_S (`sleep` the server's own, so that eventlet mode yields) until `stopping()`,
        looking each second: an app whose engine worker stopped (a server exiting, a test's app done) ends this
        thread, and with it the thread's hold on the app's metrics and live lane."""
        due = time.monotonic() + STATS_EVERY_S
        while not stopping():
            sleep(1.0)
            if time.monotonic() >= due:
                due += STATS_EVERY_S
                self.tick()
