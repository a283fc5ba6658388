"""Engine configuration: one dataclass of engine options, checked once, and a lane as a named configuration.

A workload's options are the defaults of its lanes; each lane (`LaneSpec`) is a name, a batching
policy and its own `EngineConfig`, so one run can put "continuous" beside "continuous, chunks of 64".
It does not know workloads' JSON (workload.py checks that and names the field) or which policy takes which
option (each scheduler's `Traits` says). `live_config` is the live lane's configuration (engine/live.py), here so
that the command line checks --live-options without loading torch.
"""
from dataclasses import dataclass, field, fields

from engine.admission import ORDERS

KV_ALLOCATIONS = ("paged", "reserve")  # block_manager.py: grow a block at a time, or reserve the whole request up front
PREEMPTIONS = ("recompute", "swap")    # policies.py: what becomes of a preempted request's K/V

# speculative decoding (sched/speculative.py proposes and accepts)
METHODS = ("prompt_lookup",)
MAX_K = 16  # most tokens one step may propose for one request
MAX_PIPELINE_PARALLEL = 30  # most stages of a pipeline-parallel lane (SmolLM2's 30 layers; one process each)
MAX_TENSOR_PARALLEL = 9  # most ranks of a tensor-parallel lane (SmolLM2's 9 query heads; one process each)


@dataclass(frozen=True)
class SpeculativeConfig:
    method: str = "prompt_lookup"   # how proposals are made: "prompt_lookup" (n-gram matches, no draft model)
    k: int = 4                      # most tokens proposed per request per step
    max_ngram: int = 3              # longest tail n-gram looked up
    min_ngram: int = 1              # shortest tail n-gram looked up

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"speculative.method must be one of {', '.join(METHODS)}, got {self.method!r}")
        for name, value in (("k", self.k), ("max_ngram", self.max_ngram), ("min_ngram", self.min_ngram)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
                raise ValueError(f"speculative.{name} must be an integer from 1 to {MAX_K}, got {value!r}")
        if self.min_ngram > self.max_ngram:
            raise ValueError(f"speculative.min_ngram must not exceed max_ngram ({self.max_ngram}), got {self.min_ngram}")

    def to_dict(self) -> dict:
        return {"method": self.method, "k": self.k, **({"max_ngram": self.max_ngram} if self.max_ngram != 3 else {}),
                **({"min_ngram": self.min_ngram} if self.min_ngram != 1 else {})}


@dataclass(frozen=True)
class EngineConfig:
    slots: int = 4                        # rows of the batch (requests computed together per step)
    max_wait: int = 15                    # dynamic lane, step arrivals: steps the oldest waiter may wait before a partial group starts
    max_wait_ms: float = 1000.0           # dynamic lane, arrivals in ms: the same wait in lane-clock milliseconds
    scheduling_policy: str = "fcfs"       # continuous lane admission order: a name of admission.ORDERS
    chunk_size: int | None = None         # continuous lane: most prompt tokens one request prefills per step (None: whole prompt)
    max_batch_tokens: int | None = None   # continuous lane: most tokens (decode + prefill) computed per step (None: no cap)
    kv_budget: int | None = None          # KV tokens each lane may hold, in blocks of kv_block_size (None: enough for the workload)
    kv_block_size: int = 16               # tokens per KV block
    fused: bool = False                   # one fused forward per step instead of a prefill call plus a decode call
    prefix_cache: bool = False            # continuous lane: reuse the K/V of cached full prompt blocks (prefix_cache.py)
    speculative: SpeculativeConfig | None = None  # propose tokens by prompt lookup and verify them in one forward (None: off)
    kv_allocation: str = "paged"          # "paged": a request's blocks grow one at a time; "reserve": prompt + max_new_tokens at admission
    preemption: str = "recompute"         # continuous lane under a KV budget: "recompute" a victim later, or "swap" its blocks to a host pool
    tensor_parallel_size: int = 1         # processes the model's weights are sharded over (engine/worker/tensor_parallel.py; 1: none)
    pipeline_parallel_size: int = 1       # processes the model's layers are cut into, a stage each (engine/worker/pipeline_parallel.py)
    micro_batches: int = 1                # a pipeline-parallel lane: micro-batches each forward call's rows are split into

    def __post_init__(self):
        if not isinstance(self.slots, int) or not 1 <= self.slots <= 256:
            raise ValueError(f"slots must be an integer from 1 to 256, got {self.slots!r}")
        if not isinstance(self.max_wait, int) or self.max_wait < 0:
            raise ValueError(f"max_wait must be an integer >= 0, got {self.max_wait!r}")
        if isinstance(self.max_wait_ms, bool) or not isinstance(self.max_wait_ms, (int, float)) or self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be a number >= 0, got {self.max_wait_ms!r}")
        if not isinstance(self.scheduling_policy, str) or self.scheduling_policy not in ORDERS:
            raise ValueError(f"scheduling_policy must be one of {', '.join(ORDERS)}, got {self.scheduling_policy!r}")
        if self.chunk_size is not None and (not isinstance(self.chunk_size, int) or self.chunk_size < 1):
            raise ValueError(f"chunk_size must be an integer >= 1 or unset, got {self.chunk_size!r}")
        if self.max_batch_tokens is not None and (
                not isinstance(self.max_batch_tokens, int) or self.max_batch_tokens < self.slots):
            raise ValueError(f"max_batch_tokens must be an integer >= slots ({self.slots}) so every running "
                             f"request can decode, got {self.max_batch_tokens!r}")
        if not isinstance(self.kv_block_size, int) or not 1 <= self.kv_block_size <= 1024:
            raise ValueError(f"kv_block_size must be an integer from 1 to 1024, got {self.kv_block_size!r}")
        if self.kv_budget is not None and (not isinstance(self.kv_budget, int) or self.kv_budget < self.kv_block_size):
            raise ValueError(f"kv_budget must be an integer >= kv_block_size ({self.kv_block_size}) or unset, "
                             f"got {self.kv_budget!r}")
        if not isinstance(self.prefix_cache, bool):
            raise ValueError(f"prefix_cache must be true or false, got {self.prefix_cache!r}")
        if self.kv_allocation not in KV_ALLOCATIONS:
            raise ValueError(f"kv_allocation must be one of {', '.join(KV_ALLOCATIONS)}, got {self.kv_allocation!r}")
        if self.preemption not in PREEMPTIONS:
            raise ValueError(f"preemption must be one of {', '.join(PREEMPTIONS)}, got {self.preemption!r}")
        if self.preemption == "swap" and self.kv_budget is None:
            raise ValueError('preemption "swap" needs a kv_budget: a lane without one never runs out of KV blocks, '
                             "so it never preempts")
        if self.speculative is not None and not isinstance(self.speculative, SpeculativeConfig):
            raise ValueError(f"speculative must be a SpeculativeConfig or unset, got {self.speculative!r}")
        tp = self.tensor_parallel_size
        if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_TENSOR_PARALLEL:
            raise ValueError(f"tensor_parallel_size must be an integer from 1 to {MAX_TENSOR_PARALLEL}, got {str(tp)[:40]}")
        if tp > 1 and self.speculative is not None:
            raise ValueError("tensor_parallel_size does not combine with speculative: the ranks return logits and the "
                             "lane picks tokens; accepting proposals across ranks is not built")
        self.check_pipeline()

    def check_pipeline(self) -> None:
        pp, m = self.pipeline_parallel_size, self.micro_batches
        if isinstance(pp, bool) or not isinstance(pp, int) or not 1 <= pp <= MAX_PIPELINE_PARALLEL:
            raise ValueError(f"pipeline_parallel_size must be an integer from 1 to {MAX_PIPELINE_PARALLEL}, "
                             f"got {str(pp)[:40]}")
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= self.slots:
            raise ValueError(f"micro_batches must be an integer from 1 to the lane's slots ({self.slots}): a "
                             f"micro-batch holds at least one row, got {str(m)[:40]}")
        if pp == 1:
            if m != 1:
                raise ValueError("micro_batches applies to a pipeline-parallel lane: give it pipeline_parallel_size")
            return
        for key, given, why in (
                ("tensor_parallel_size", self.tensor_parallel_size != 1, "stages of tensor-parallel ranks are not built"),
                ("speculative", self.speculative is not None, "the last stage returns logits and the lane picks tokens; "
                                                              "accepting proposals across stages is not built"),
                ("fused", self.fused, "a fused step packs every row into one sequence, which cannot be split into "
                                      "micro-batches of rows")):
            if given:
                raise ValueError(f"{key} does not combine with pipeline_parallel_size {pp}: {why}")

    @property
    def kv_blocks(self) -> int | None:
        return None if self.kv_budget is None else self.kv_budget // self.kv_block_size

    def changes(self, base: "EngineConfig") -> dict:
        """The options that differ from `base`, by name (what a workload or lane JSON must say)."""
        changed = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(base, f.name)}
        if changed.get("speculative") is not None:
            changed["speculative"] = changed["speculative"].to_dict()
        return changed


# data-parallel lanes (engine/fleet.py): N replicas behind a router (engine/sched/router.py; docs/fleets.md)
ROUTERS = ("round_robin", "least_loaded", "power_of_two", "consistent_hash", "cache_aware", "kv_aware", "vllm_dp")
MIN_REPLICAS, MAX_REPLICAS = 2, 4
# router knobs: their defaults are the real routers' (vllm-router's CLI, Dynamo's frontend); which routers read which
ROUTER_OPTIONS = {"cache_threshold": ("cache_aware",), "balance_abs_threshold": ("cache_aware",),
                  "balance_rel_threshold": ("cache_aware",), "router_seed": ("power_of_two",),
                  "overlap_score_weight": ("kv_aware",)}


@dataclass(frozen=True)
class FleetConfig:
    size: int                             # replicas (data_parallel_size): each a whole continuous engine
    router: str                           # which router picks a replica for each arrival: a name of ROUTERS
    cache_threshold: float = 0.3          # cache_aware: the prefix match rate above which the best match wins
    balance_abs_threshold: int = 64       # cache_aware: imbalanced when max - min load exceeds this...
    balance_rel_threshold: float = 1.5    # ...and max load exceeds this times the min: then least loaded wins
    router_seed: int = 0                  # power_of_two: the seed of its random pair
    overlap_score_weight: float = 1.0     # kv_aware: cost = weight * prefill blocks + decode blocks

    def __post_init__(self):
        if isinstance(self.size, bool) or not isinstance(self.size, int) or not MIN_REPLICAS <= self.size <= MAX_REPLICAS:
            raise ValueError(f"data_parallel_size must be an integer from {MIN_REPLICAS} to {MAX_REPLICAS}, "
                             f"got {self.size!r}")
        if self.router not in ROUTERS:
            raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {str(self.router)[:40]!r}")
        for name, lo, hi in (("cache_threshold", 0, 1), ("balance_rel_threshold", 1, 1000),
                             ("overlap_score_weight", 0, 1000)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise ValueError(f"{name} must be a number from {lo} to {hi}, got {value!r}")
        for name in ("balance_abs_threshold", "router_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 32:
                raise ValueError(f"{name} must be an integer from 0 to 2**32 - 1, got {value!r}")

    def to_dict(self) -> dict:
        """The lane options that say it: data_parallel_size, router and the knobs that differ from the defaults."""
        base = FleetConfig(self.size, self.router)
        return {"data_parallel_size": self.size, "router": self.router,
                **{k: getattr(self, k) for k in ROUTER_OPTIONS if getattr(self, k) != getattr(base, k)}}


# prefill/decode disaggregation (engine/disaggregation.py; docs/disaggregation.md): prefill engines, then decode engines
MIN_PD_ENGINES, MAX_PD_ENGINES = 1, 3


@dataclass(frozen=True)
class DisaggConfig:
    prefill: int = 1                      # prefill engines: each computes prompts and first tokens, then hands off
    decode: int = 1                       # decode engines: each takes handed-off requests and runs decode steps only

    def __post_init__(self):
        for name in ("prefill", "decode"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not MIN_PD_ENGINES <= value <= MAX_PD_ENGINES:
                raise ValueError(f"{name} must be an integer from {MIN_PD_ENGINES} to {MAX_PD_ENGINES}, got "
                                 f"{str(value)[:40]}")

    def to_dict(self) -> dict:
        return {"disaggregation": {"prefill": self.prefill, "decode": self.decode}}


@dataclass(frozen=True)
class LaneSpec:
    name: str              # what the page, the metrics and the exports call the lane (unique in a run)
    policy: str            # the batching policy: a name of policies.POLICIES (checked by the workload parser)
    config: EngineConfig   # the lane's options: the workload's, with the lane's own changes
    engine: str = "batch-lanes"  # who computes it: our engine, or "vllm" (a real vLLM engine, engine/peers/vllm_lane.py)
    engine_options: dict = field(default_factory=dict)  # a vLLM lane: the options its object set (vllm_options.py)
    fleet: FleetConfig | None = None  # a data-parallel lane: its replicas and router (None: one engine)
    disaggregation: DisaggConfig | None = None  # a P/D lane: its prefill and decode engines (None: colocated)

    @classmethod
    def plain(cls, policy: str, config: EngineConfig) -> "LaneSpec":
        return cls(policy, policy, config)

    def to_dict(self, defaults: EngineConfig) -> str | dict:
        """The bare policy name for a lane with no options of its own, else {"name", "policy", ...changes}."""
        changes = self.config.changes(defaults)
        if self.engine != "batch-lanes":
            slots = {"slots": self.config.slots} if self.config.slots != defaults.slots else {}
            return {"name": self.name, "engine": self.engine, "policy": self.policy, **slots, **self.engine_options}
        fleet = self.fleet.to_dict() if self.fleet is not None else {}
        pd = self.disaggregation.to_dict() if self.disaggregation is not None else {}
        if self.name == self.policy and not changes and not fleet and not pd:
            return self.policy
        return {"name": self.name, "policy": self.policy, **changes, **fleet, **pd}


# How the live lane batches unless told otherwise, as vLLM's V1 scheduler does: a joiner's prompt is prefilled in
# chunks mixed into the running requests' decode step, under a token budget (a prompt longer than the room left
# is chunked by it), in one forward a step, so a long prompt never stalls the streams for a whole prefill call.
# Measured best of four option sets (docs/live-api.md, scripts/live_bench.py).
LIVE_OPTIONS = {"max_batch_tokens": 256, "chunk_size": None, "fused": True,
                "disaggregation": None}   # {"prefill": 1, "decode": 1}: a served P/D pair (engine/live_pd.py)
LIVE_PD = {"prefill": 1, "decode": 1}


def live_pd(options: dict | None) -> bool:
    """Whether the live options ask for a served P/D pair; ValueError naming the field unless it is one of each."""
    pd = (options or {}).get("disaggregation")
    if pd is not None and pd != LIVE_PD:
        raise ValueError(f"disaggregation: a served P/D pair is {LIVE_PD} (one prefill worker, one decode engine), "
                         f"got {pd!r}")
    return pd is not None


def live_config(slots: int, row_len: int, options: dict | None = None) -> EngineConfig:
    """The live lane's EngineConfig: LIVE_OPTIONS with `options`' changes (None: turn the option off), a prefix
    cache, and a KV budget of exactly the slots' rows. ValueError naming an unknown or bad option."""
    options = {**LIVE_OPTIONS, **(options or {})}
    unknown = set(options) - set(LIVE_OPTIONS)
    if unknown:
        raise ValueError(f"unknown live option {', '.join(sorted(unknown))}; known: {', '.join(LIVE_OPTIONS)}")
    if isinstance(options["max_batch_tokens"], int):
        options["max_batch_tokens"] = max(options["max_batch_tokens"], slots)  # every running request decodes
    live_pd(options)
    del options["disaggregation"]   # not how a lane batches: which processes run it
    if not isinstance(options["fused"], bool):
        raise ValueError(f"fused must be true or false, got {options['fused']!r}")
    # a prefix cache (prompts that share a prefix reuse its K/V: the API's cached_tokens), within a KV budget of
    # exactly the slots' rows: running requests always fit, and cached blocks no request holds are evicted
    # (least recently used) before the cache outgrows the slot cache itself
    block = EngineConfig.kv_block_size
    return EngineConfig(slots=slots, prefix_cache=True, kv_budget=slots * -(-row_len // block) * block, **options)
