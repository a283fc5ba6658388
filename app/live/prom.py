"""`/metrics`: the live lane's numbers in Prometheus's text format, through prometheus_client, under vLLM's
names, labels and bucket edges with a `batch_lanes:` prefix (`--metrics-prefix vllm` gives vLLM's own `vllm:`),
each sample labelled `model_name` and `engine` (the replica: "0" in one process, the worker's name in scale-out),
so a dashboard made for vLLM reads them unchanged (deploy/grafana/batch-lanes.json is ours).

Each app has its own registry (tests build many apps in one process). The gauges (running, waiting, KV use) are
read from the lane's handle when scraped (`watch`), so an idle server reads zero; the counters and histograms
are fed by the gateway (app.live.gateway) on the worker's thread as requests arrive, start, write and finish.
The families are vLLM 0.32's (vllm/v1/metrics/loggers.py) for what this engine does: no LoRA, spec decoding,
KV connectors, multimodal or sleep mode. `num_requests_waiting_by_reason` has `capacity` only (nothing here is
`deferred`, always 0); `cache_config_info` labels the lane's KV capacity in tokens and its prefix caching.
`request_success` counts every request that ended, by `finished_reason`: stop, length, abort (its client
left) or error (a failed step) — a success rate is stop+length over all. This module knows prometheus_client,
nothing of the engine.
"""
from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

disable_created_metrics()   # no `_created` series, as vLLM serves them (prometheus_client's switch is per process)
PREFIX = "batch_lanes"
FINISHED_REASONS = ("stop", "length", "abort", "error")   # vLLM's FinishReason strings, and ours for a failed step
# vLLM's bucket edges (vllm/v1/metrics/loggers.py), seconds
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0)
PREEMPTION_BUCKETS = (0, 1, 2, 3, 4, 5, 10, 20, 50)   # a request's preemptions
# a served P/D pair's five TTFT parts (docs/disaggregation.md): batch_lanes:pd_<part>_time_seconds
PD_PARTS = {"prefill_queue": "P/D: time from arrival to the prefill worker's step that admitted the request.",
            "prefill": "P/D: time from that step's start to the end of the prefill step that wrote the first token.",
            "kv_transfer": "P/D: the KV blocks' copy, prefill worker to decode engine (both sides, measured).",
            "decode_queue": "P/D: time from the copy's end to the decode engine's first step for the request.",
            "first_decode": "P/D: that step (the first and second tokens reach the client at its end)."}
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def one_two_five_buckets(most: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, ... up to `most` (vLLM's edges for token counts, up to the longest request)."""
    edges, scale = [], 1
    while True:
        for m in (1, 2, 5):
            if m * scale > most:
                return tuple(edges)
            edges.append(m * scale)
        scale *= 10


class LiveMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, prefix: str = PREFIX, max_model_len: int = 4096, engine: str = "0"):
        self.p = p = prefix.rstrip(":") + ":"
        self.engine = engine
        self.registry = r = CollectorRegistry()
        self.model: Callable[[], str] = lambda: ""
        self.load: Callable[[], dict] | None = None   # the lane's {running, waiting, kv_used, kv_capacity}, now
        # running totals of the counters, for the stats line (app.live.stats) without reading prometheus_client back
        self.totals = {"prompt": 0, "generation": 0, "cache_queries": 0, "cache_hits": 0}
        m = ["model_name", "engine"]

        def hist(name: str, doc: str, buckets) -> Histogram:
            return Histogram(p + name, doc, m, buckets=buckets, registry=r)
        self.ttft = hist("time_to_first_token_seconds", "Time from arrival to the first token.", TTFT_BUCKETS)
        self.itl = hist("inter_token_latency_seconds", "Time between two tokens of a request.", ITL_BUCKETS)
        self.e2e = hist("e2e_request_latency_seconds", "Time from arrival to the last token.", REQUEST_BUCKETS)
        self.queue_time = hist("request_queue_time_seconds", "Time from arrival to taking a slot.", REQUEST_BUCKETS)
        self.inference = hist("request_inference_time_seconds", "Time from taking a slot to the last token.",
                              REQUEST_BUCKETS)
        self.prefill = hist("request_prefill_time_seconds", "Time from taking a slot to the first token.",
                            REQUEST_BUCKETS)
        self.decode = hist("request_decode_time_seconds", "Time from the first token to the last.", REQUEST_BUCKETS)
        self.tpot = hist("request_time_per_output_token_seconds",
                         "A finished request's decode time over its tokens after the first.", ITL_BUCKETS)
        self.request_preemptions = hist("request_num_preemptions", "Times a finished request was preempted.",
                                        PREEMPTION_BUCKETS)
        token_buckets = one_two_five_buckets(max_model_len)
        self.prefill_computed = hist("request_prefill_kv_computed_tokens",
                                     "Prompt tokens a finished request's prefill computed (not from the cache).",
                                     token_buckets)
        self.max_tokens = hist("request_params_max_tokens", "The max_tokens a request asked for.", token_buckets)
        self.request_prompt = hist("request_prompt_tokens", "Prompt tokens of a finished request.", token_buckets)
        self.request_generation = hist("request_generation_tokens", "Tokens a finished request generated.",
                                       token_buckets)
        self.iteration = hist("iteration_tokens_total", "Tokens a step computed (prompt and generated).",
                              ITERATION_BUCKETS)
        # a served P/D pair (engine/live_pd.py): the five parts of a handed-off request's TTFT as the client sees it
        # (its first token comes with its second, from the decode engine), and the KV bytes copied between the two
        self.pd_parts = {part: hist(f"pd_{part}_time_seconds", doc, TTFT_BUCKETS) for part, doc in PD_PARTS.items()}
        self.pd_bytes = Counter(p + "pd_kv_transfer_bytes", "KV cache bytes copied from the prefill worker to the "
                                "decode engine (blocks x block bytes).", m, registry=r)
        self.prompt_tokens = Counter(p + "prompt_tokens", "Prompt tokens of the requests served.", m, registry=r)
        self.generation_tokens = Counter(p + "generation_tokens", "Tokens generated.", m, registry=r)
        self.preemptions = Counter(p + "num_preemptions", "Requests evicted from the live lane.", m, registry=r)
        self.cache_queries = Counter(p + "prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", m,
                                     registry=r)
        self.cache_hits = Counter(p + "prefix_cache_hits", "Prompt tokens the prefix cache held.", m, registry=r)
        self.cached_tokens = Counter(p + "prompt_tokens_cached", "Prompt tokens taken from the prefix cache.", m,
                                     registry=r)
        self.requests = Counter(p + "request_success", "Requests that ended, by finished_reason.",
                                m + ["finished_reason"], registry=r)
        r.register(_Gauges(self))

    def watch(self, load: Callable[[], dict], model: Callable[[], str]) -> None:
        """Read the gauges from `load()` and the `model_name` label from `model()` when scraped."""
        self.load, self.model = load, model

    def _m(self) -> tuple[str, str]:
        """The label values of every series: model_name, engine."""
        return self.model() or "", self.engine

    def arrived(self, prompt_tokens: int, max_tokens: int | None = None) -> None:
        self.prompt_tokens.labels(*self._m()).inc(prompt_tokens)
        if max_tokens is not None:
            self.max_tokens.labels(*self._m()).observe(max_tokens)
        self.totals["prompt"] += prompt_tokens

    def admitted(self, waited_s: float) -> None:
        self.queue_time.labels(*self._m()).observe(waited_s)

    def first_token(self, ttft_s: float) -> None:
        self.ttft.labels(*self._m()).observe(ttft_s)

    def tokens_after_first(self, n: int, step_s: float) -> None:
        itl = self.itl.labels(*self._m())
        for _ in range(n):
            itl.observe(step_s)

    def generated(self, n: int) -> None:
        self.generation_tokens.labels(*self._m()).inc(n)
        self.totals["generation"] += n

    def finished(self, reason: str, e2e_s: float, prefill_s: float | None, decode_s: float | None,
                 inference_s: float | None, prompt_tokens: int, generation_tokens: int, preemptions: int = 0,
                 cached_tokens: int = 0) -> None:
        """A request that ended with its last token (`reason` stop or length): its times and sizes, its
        preemptions and the prompt tokens its last (re)start took from the prefix cache."""
        model = self._m()
        if decode_s is not None and generation_tokens > 1:   # vLLM's mean time per output token of a request
            self.tpot.labels(*model).observe(decode_s / (generation_tokens - 1))
        self.request_preemptions.labels(*model).observe(preemptions)
        self.prefill_computed.labels(*model).observe(max(0, prompt_tokens - cached_tokens))
        self.e2e.labels(*model).observe(e2e_s)
        for histogram, value in ((self.prefill, prefill_s), (self.decode, decode_s), (self.inference, inference_s)):
            if value is not None:
                histogram.labels(*model).observe(value)
        self.request_prompt.labels(*model).observe(prompt_tokens)
        self.request_generation.labels(*model).observe(generation_tokens)
        self.ended(reason)

    def handed_off(self, parts_ms: dict[str, float], kv_bytes: int) -> None:
        """A served P/D pair's hand-off, once its first decode step ended: its five TTFT parts (ms) and bytes."""
        model = self._m()
        for part, ms in parts_ms.items():
            self.pd_parts["kv_transfer" if part == "transfer" else part].labels(*model).observe(max(0.0, ms) / 1000)
        self.pd_bytes.labels(*model).inc(kv_bytes)

    def ended(self, reason: str) -> None:
        """Count a request that ended, by `reason` (FINISHED_REASONS)."""
        assert reason in FINISHED_REASONS, reason
        self.requests.labels(*self._m(), reason).inc()

    def stepped(self, preemptions: int, tokens: int, cache_queries: int, cache_hits: int) -> None:
        model = self._m()
        if tokens:
            self.iteration.labels(*model).observe(tokens)
        if preemptions:
            self.preemptions.labels(*model).inc(preemptions)
        if cache_queries:
            self.cache_queries.labels(*model).inc(cache_queries)
            self.cache_hits.labels(*model).inc(cache_hits)
            self.cached_tokens.labels(*model).inc(cache_hits)
            self.totals["cache_queries"] += cache_queries
            self.totals["cache_hits"] += cache_hits

    def exposition(self) -> bytes:
        model = self._m()
        for family in (self.ttft, self.itl, self.e2e, self.queue_time, self.inference, self.prefill, self.decode,
                       self.request_prompt, self.request_generation, self.iteration, self.prompt_tokens,
                       self.generation_tokens, self.preemptions, self.cache_queries, self.cache_hits, self.tpot,
                       self.request_preemptions, self.prefill_computed, self.max_tokens, self.cached_tokens):
            family.labels(*model)           # every family shows its zero before the first request
        for reason in FINISHED_REASONS:
            self.requests.labels(*model, reason)
        return generate_latest(self.registry)


class _Gauges:
    """The gauges, read from the lane when scraped: what it holds now, not at its last step."""

    def __init__(self, metrics: LiveMetrics):
        self.metrics = metrics

    def collect(self):
        m, p = self.metrics, self.metrics.p
        load = m.load() if m.load is not None else {"running": 0, "waiting": 0, "kv_used": 0, "kv_capacity": 1}
        for name, doc, value in (
                ("num_requests_running", "Requests holding a slot of the live lane.", load["running"]),
                ("num_requests_waiting", "Requests waiting for a slot of the live lane.", load["waiting"]),
                ("kv_cache_usage_perc", "Share of the live lane's KV cache in use (0 to 1).",
                 load["kv_used"] / max(1, load["kv_capacity"]))):
            family = GaugeMetricFamily(p + name, doc, labels=["model_name", "engine"])
            family.add_metric(list(m._m()), value)
            yield family
        family = GaugeMetricFamily(p + "num_requests_waiting_by_reason",
                                   "Requests waiting, by reason: capacity (a slot or KV); nothing here is deferred.",
                                   labels=["model_name", "engine", "reason"])
        family.add_metric([*m._m(), "capacity"], load["waiting"])
        family.add_metric([*m._m(), "deferred"], 0)
        yield family
        family = GaugeMetricFamily(p + "cache_config_info", "The live lane's KV cache: its capacity in tokens.",
                                   labels=["engine", "kv_capacity_tokens", "enable_prefix_caching"])
        family.add_metric([m.engine, str(load["kv_capacity"]), "True"], 1)
        yield family
