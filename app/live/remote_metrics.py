"""`/metrics` on a web process of a scale-out deployment: the engine workers' live-lane metrics, side by side.

Each engine worker keeps the same LiveMetrics (app.live.prom) as a single-process server, fed by its own gateway,
labelled `engine` with its worker's name, and writes its exposition to Redis with its live beat
(app.runs.live_link). A scrape here serves every live worker's families merged, each worker's series under its
own `engine` (as vLLM serves its data-parallel engines; a dashboard sums by model_name). A worker that died
leaves with its beat: its series go, which Prometheus reads as the end of those series; the requests it failed
by dying are counted by the web processes that saw them end (`request_success_total{finished_reason="error"}`
under its `engine`, kept in Redis so every web process serves them). Every web process reports the same
numbers (scrape one). This module knows the Prometheus text format, nothing of the engine.
"""
import redis
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from .remote import LOST, RemoteLane, metrics_key


def _value(v: float) -> str:
    return repr(float(v)) if v != int(v) or abs(v) >= 1e15 else f"{float(v):.1f}"


def _labels(labels: tuple) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def summed(texts: list[str]) -> str:
    """The expositions `texts` as one: a series in several (the same labels) added up."""
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
            out.append(f"{sample}{_labels(labels)} {_value(value)}")
    return "\n".join(out) + "\n"


class RemoteMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, lane: RemoteLane, prefix: str = "batch_lanes"):
        self.lane, self.p = lane, prefix.rstrip(":") + ":"

    def _lost(self, lost: dict) -> str:
        """The requests dead workers failed, as request_success{finished_reason="error"} under their `engine`."""
        name, model = self.p + "request_success", self.lane.model()
        lines = [f"# HELP {name} Requests that ended, by finished_reason.", f"# TYPE {name} counter"]
        lines += [f'{name}_total{_labels((("model_name", model), ("engine", w), ("finished_reason", "error")))} '
                  f"{float(n)}" for w, n in sorted(lost.items())]
        return "\n".join(lines) + "\n"

    def exposition(self) -> bytes:
        beats = self.lane.workers()
        try:
            texts = [t for t in self.lane.r.mget([metrics_key(w) for w in beats]) if t] if beats else []
            lost = {w: int(n) for w, n in self.lane.r.hgetall(LOST).items() if w not in beats}
            if lost:
                texts.append(self._lost(lost))
        except redis.RedisError:
            texts = []
        return summed(texts).encode()
