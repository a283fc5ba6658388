"""`/metrics` on a web process of a scale-out deployment: the engine workers' live-lane metrics, summed.

Each engine worker keeps the same LiveMetrics (app.live.prom) as a single-process server, fed by its own gateway,
and writes its exposition to Redis with its live beat (app.runs.live_link). A scrape here sums every live
worker's samples series by series (counters, histogram buckets, sums and counts, running and waiting), so a
dashboard sees the deployment as one server; the KV-use gauge is the workers' KV held over their KV capacity. A
worker that died leaves the sum with its beat: the counters then drop, which Prometheus's rate() reads as a
counter reset. Every web process reports the same numbers (scrape one). This module knows the Prometheus text
format, nothing of the engine.
"""
import redis
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from .remote import RemoteLane, metrics_key

KV_PERC = "kv_cache_usage_perc"


def _value(v: float) -> str:
    return repr(float(v)) if v != int(v) or abs(v) >= 1e15 else f"{float(v):.1f}"


def _labels(labels: tuple) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def summed(texts: list[str], kv: tuple[int, int]) -> str:
    """The expositions `texts` as one: every series' values added up; `kv` = (KV held, KV capacity) overall."""
    families: dict[str, tuple[str, str, dict]] = {}   # family name -> (type, help, {(sample name, labels): value})
    for text in texts:
        for f in text_string_to_metric_families(text):
            _, _, samples = families.setdefault(f.name, (f.type, f.documentation, {}))
            for s in f.samples:
                key = (s.name, tuple(s.labels.items()))
                samples[key] = samples.get(key, 0.0) + s.value
    out = []
    for name, (kind, doc, samples) in families.items():
        shown = name + "_total" if kind == "counter" else name
        out += [f"# HELP {shown} {doc}", f"# TYPE {shown} {kind}"]
        for (sample, labels), value in samples.items():
            if name.endswith(KV_PERC):
                value = kv[0] / max(1, kv[1])
            out.append(f"{sample}{_labels(labels)} {_value(value)}")
    return "\n".join(out) + "\n"


class RemoteMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, lane: RemoteLane):
        self.lane = lane

    def exposition(self) -> bytes:
        beats = self.lane.workers()
        try:
            texts = [t for t in self.lane.r.mget([metrics_key(w) for w in beats]) if t] if beats else []
        except redis.RedisError:
            texts = []
        kv = (sum(b["kv_used"] for b in beats.values()), sum(b["kv_capacity"] for b in beats.values()))
        return summed(texts, kv).encode()
