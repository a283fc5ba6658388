"""What the fleet view shows, fetched: every replica's live lane and the router's own counters, read at once.

A fleet deployment (`make fleet`, scripts/fleet.py) is N Batch Lanes servers behind the real vllm-router. The fleet
view (app/live/fleet_app.py) asks `FleetScrape.snapshot()` once a second: it reads, all at the same time and each with
a short timeout, every replica's `GET /api/live` (its live lane: recent step records and request summaries, with
`started_at`, the wall-clock moment of its lane time 0, which puts every replica on one clock), every replica's
`/metrics` (its prefix-cache counters and finished requests) and the router's Prometheus endpoint (its `vllm_router_*`
families as they are, histogram buckets left out). A replica or router that does not answer in time is reported down
with the reason, never waited for. This module knows those three HTTP answers and the Prometheus text format; it
knows nothing of the engine, of Flask or of the page.
"""
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

TIMEOUT_S = 1.5          # a replica or router slower than this to answer is shown as not answering
WINDOW_MS = 65_000       # the steps kept of each replica's lane: the minute its figures look back (tokens/s), and 5 s


def fetch(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def why(e: BaseException) -> str:
    """A down replica's reason, as a person reads it ("connection refused", "timed out after 1.5 s", "HTTP 503")."""
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code}"
    reason = getattr(e, "reason", e)
    if isinstance(reason, TimeoutError) or isinstance(e, TimeoutError):
        return "timed out"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return str(reason) or type(reason).__name__


def samples(text: str) -> list[dict]:
    """Every sample of a Prometheus exposition but histogram buckets: {name, labels, value, help} (help: its
    family's HELP text, as the exporter wrote it)."""
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.name.endswith("_bucket"):
                out.append({"name": s.name, "labels": dict(s.labels), "value": s.value, "help": family.documentation})
    return out


def cache_counters(text: str) -> dict:
    """A replica's prefix-cache counters and finished requests from its `/metrics` (either prefix), summed."""
    totals = {"prefix_cache_queries": 0.0, "prefix_cache_hits": 0.0, "requests": 0.0}
    for s in samples(text):
        name = s["name"].split(":", 1)[-1]
        if name in ("prefix_cache_queries_total", "prefix_cache_hits_total"):
            totals[name.removesuffix("_total")] += s["value"]
        elif name == "request_success_total":
            totals["requests"] += s["value"]
    return totals


def trimmed(live: dict, window_ms: float) -> dict:
    """A replica's `/api/live` answer with only the steps that end in the last `window_ms` of its lane clock."""
    if not live.get("records") or live.get("now_ms") is None:
        return live
    since = live["now_ms"] - window_ms
    return {**live, "records": [r for r in live["records"] if r["start_ms"] + r["ms"] >= since]}


@dataclass
class FleetScrape:
    """Where a fleet's parts answer: the replicas' base URLs, the router's URL and its metrics URL."""
    replicas: list[str]                # each Batch Lanes server's base URL, e.g. http://127.0.0.1:8001
    router: str                        # vllm-router's base URL (what clients send /v1 to)
    router_metrics: str                # its Prometheus endpoint, e.g. http://127.0.0.1:8100/metrics
    policy: str = ""                   # the router's policy, as the fleet script started it (shown, not checked)
    timeout: float = TIMEOUT_S

    def replica(self, index: int, window_ms: float) -> dict:
        url = self.replicas[index]
        out = {"index": index, "url": url, "up": False, "error": None, "live": None, "metrics": None}
        try:
            out["live"] = trimmed(json.loads(fetch(f"{url}/api/live", self.timeout)), window_ms)
            out["up"] = True
            out["metrics"] = cache_counters(fetch(f"{url}/metrics", self.timeout).decode())
        except (OSError, ValueError) as e:   # URLError, refused, timed out, a body that is not JSON
            out["error"] = why(e)
        return out

    def router_counters(self) -> dict:
        out = {"url": self.router, "metrics_url": self.router_metrics, "policy": self.policy, "up": False,
               "error": None, "samples": []}
        try:
            out["samples"] = samples(fetch(self.router_metrics, self.timeout).decode())
            out["up"] = True
        except (OSError, ValueError) as e:
            out["error"] = why(e)
        return out

    def snapshot(self, window_ms: float = WINDOW_MS) -> dict:
        """Every replica and the router, read at once: {at (epoch s), router, replicas}; never longer than the
        timeout (plus the reading), whatever is down."""
        with ThreadPoolExecutor(len(self.replicas) + 1) as pool:
            router = pool.submit(self.router_counters)
            replicas = [pool.submit(self.replica, i, window_ms) for i in range(len(self.replicas))]
            return {"at": time.time(), "router": router.result(), "replicas": [r.result() for r in replicas]}
