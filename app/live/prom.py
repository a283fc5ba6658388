"""`/metrics`: the live lane's numbers in Prometheus's text format, through prometheus_client, under vLLM's
names with a `batch_lanes:` prefix (vLLM's own are `vllm:`), so dashboards made for vLLM read them.

Each app has its own registry (tests build many apps in one process). The gateway (app.live.gateway) calls these
methods on the worker's thread as requests arrive, start, write and finish. This module knows
prometheus_client, nothing of the engine.
"""
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

P = "batch_lanes:"
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                   40.0, 80.0)


class LiveMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, model: str = ""):
        self.registry = r = CollectorRegistry()
        self.running = Gauge(P + "num_requests_running", "Requests holding a slot of the live lane.", registry=r)
        self.waiting = Gauge(P + "num_requests_waiting", "Requests waiting for a slot of the live lane.", registry=r)
        self.kv = Gauge(P + "kv_cache_usage_perc", "Share of the live lane's KV cache in use (0 to 1).", registry=r)
        self.ttft = Histogram(P + "time_to_first_token_seconds", "Time from arrival to the first token.",
                              buckets=LATENCY_BUCKETS, registry=r)
        self.itl = Histogram(P + "inter_token_latency_seconds", "Time between two tokens of a request.",
                             buckets=LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram(P + "e2e_request_latency_seconds", "Time from arrival to the last token.",
                             buckets=LATENCY_BUCKETS, registry=r)
        self.queue_time = Histogram(P + "request_queue_time_seconds", "Time from arrival to taking a slot.",
                                    buckets=LATENCY_BUCKETS, registry=r)
        self.prompt_tokens = Counter(P + "prompt_tokens", "Prompt tokens of the requests served.", registry=r)
        self.generation_tokens = Counter(P + "generation_tokens", "Tokens generated.", registry=r)
        self.preemptions = Counter(P + "num_preemptions", "Requests evicted from the live lane.", registry=r)
        self.requests = Counter(P + "request_success", "Requests that finished.", registry=r)

    def arrived(self, prompt_tokens: int) -> None:
        self.prompt_tokens.inc(prompt_tokens)

    def admitted(self, waited_s: float) -> None:
        self.queue_time.observe(waited_s)

    def first_token(self, ttft_s: float) -> None:
        self.ttft.observe(ttft_s)

    def tokens_after_first(self, n: int, step_s: float) -> None:
        for _ in range(n):
            self.itl.observe(step_s)

    def generated(self, n: int) -> None:
        self.generation_tokens.inc(n)

    def finished(self, e2e_s: float) -> None:
        self.e2e.observe(e2e_s)
        self.requests.inc()

    def stepped(self, running: int, waiting: int, kv: float, preemptions: int) -> None:
        self.running.set(running)
        self.waiting.set(waiting)
        self.kv.set(kv)
        if preemptions:
            self.preemptions.inc(preemptions)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
