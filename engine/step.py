"""The step record: what one lane did in one step.

Every number and every pixel Batch Lanes shows is computed from these records: the CLI table,
the metrics, the canvas, the exports. A record is immutable and JSON-ready; this module knows
nothing about models, schedulers or sockets.
"""
from dataclasses import asdict, dataclass, field, replace
from enum import Enum


class SlotState(str, Enum):
    """What a slot of the batch did in a step. The strings are the wire vocabulary (see static/js/core/vocab.js)."""
    PREFILL = "prefill"      # read (part of) a prompt; the last chunk also writes the first token
    DECODE = "decode"        # wrote one more token
    PADDING = "padding"      # row still computed for a finished member of a static group
    IDLE = "idle"            # no request, no compute
    PREEMPTED = "preempted"  # its request was evicted this step to free KV blocks (recomputed when it runs again)
    SWAPPED = "swapped"      # its request's KV blocks were copied out to the host pool this step (it resumes later)


class Forward(str, Enum):
    """Which forward calls a step made. The strings are the wire vocabulary (see static/js/core/vocab.js)."""
    NONE = "none"        # nothing computed (the lane waited)
    PREFILL = "prefill"  # one call, prompt rows only
    DECODE = "decode"    # one call, one-token rows only
    SPLIT = "split"      # a prefill call, then a decode call
    FUSED = "fused"      # one call holding prefill and decode rows


class StopReason(str, Enum):
    EOS = "eos"              # the model wrote an end-of-sequence token
    LENGTH = "length"        # max_new_tokens reached
    STOP = "stop"            # its text now holds one of the request's stop strings
    CANCELLED = "cancelled"  # its client went away (a live request whose connection closed)


@dataclass(frozen=True)
class SlotRecord:
    state: SlotState
    request: str | None = None       # request id, None when idle
    token_id: int | None = None      # token written this step (None: no token, e.g. a partial prefill)
    token: str | None = None         # its text as it extends the response
    stop: StopReason | None = None   # set on the request's last token
    prefill: tuple[int, int] | None = None  # (prompt tokens cached after this step, prompt tokens in all)
    special: bool = False            # the token is a special token of the tokenizer (<|im_end|>, ...), not text
    cached: int = 0                  # prompt tokens this prefill cell took from the prefix cache (not computed);
                                     # set on the cell of the step the request (re)started in
    tokens: tuple[int, ...] | None = None  # a speculative cell that wrote several tokens: all of them (token_id is
                                           # the last; token is their text, without a closing EOS)
    proposed: int | None = None      # a speculative cell: tokens proposed by prompt lookup and verified this step
    accepted: int | None = None      # ...of which the model agreed with (and the cell wrote) this many
    logprobs: tuple | None = None    # its request asked for logprobs: per token the cell wrote, an Entry (token id,
                                     # logprob, its top (id, logprob) pairs; engine.worker.logprobs)
    prompt_logprobs: tuple | None = None  # its request asked for prompt logprobs: on the cell of its first token, an
                                          # Entry per prompt token (None for the first, which nothing predicts)

    def to_dict(self) -> dict:
        d = {"state": self.state.value, "request": self.request, "token_id": self.token_id, "token": self.token}
        if self.stop is not None:
            d["stop"] = self.stop.value
        if self.special:
            d["special"] = True
        if self.prefill is not None:
            d["prefill"] = list(self.prefill)
        if self.cached:
            d["cached"] = self.cached
        if self.tokens is not None:
            d["tokens"] = list(self.tokens)
        if self.proposed is not None:
            d["proposed"], d["accepted"] = self.proposed, self.accepted
        if self.logprobs is not None:
            d["logprobs"] = self.logprobs
        if self.prompt_logprobs is not None:
            d["prompt_logprobs"] = self.prompt_logprobs
        return d


@dataclass(frozen=True)
class Route:
    """A fleet router's decision for one request, made at its arrival from what the router could know then."""
    request: str                      # the request's id
    replica: int                      # the replica it was sent to (0-based)
    branch: str                       # why: the policy's branch ("cache_hit", "load_balance", "low_match", "hash",
                                      # "round_robin", "least_loaded", "power_of_two", "lowest_cost", "tie", ...)
    at_ms: float                      # when it arrived: lane-clock ms (arrivals in ms), else its 0-based step
    loads: tuple[int, ...]            # per replica: the router's in-flight count (sent, not yet returned) then
    matched: tuple[int, ...]          # per replica: prompt tokens of this request its prefix cache held then
    prompt_tokens: int                # the request's prompt tokens (what `matched` is a share of)
    scores: tuple[float | None, ...] = ()  # per replica: the policy's own score (cache_aware: its tree's match rate;
                                      # kv_aware: the cost; vllm_dp: the score; power_of_two: the pair's loads, None
                                      # for the replicas it did not sample); () for a policy that scores nothing

    def to_dict(self) -> dict:
        return {"request": self.request, "replica": self.replica, "branch": self.branch, "at_ms": self.at_ms,
                "loads": list(self.loads), "matched": list(self.matched), "prompt_tokens": self.prompt_tokens,
                "scores": list(self.scores)}


@dataclass(frozen=True)
class Transfer:
    """A P/D lane's hand-off of one request (engine/disaggregation.py): its KV blocks copied from a prefill engine's
    pool into a decode engine's, once the prefill engine wrote its first token."""
    request: str                      # the request's id
    prefill: int                      # the prefill engine it left (0-based among the lane's prefill engines)
    decode: int                       # the decode engine it went to (0-based among the decode engines)
    blocks: int                       # KV blocks copied: those covering its prompt
    bytes: int                        # bytes copied: blocks x the pool's bytes per block (every layer's K and V)
    ms: float                         # how long the copy took: measured (the model), or the simulator's cost model
    start_ms: float                   # when it began: the end of the prefill step that wrote the first token
    src: tuple[int, ...]              # its block table on the prefill engine (freed once copied)
    dst: tuple[int, ...]              # its block table on the decode engine (allocated for the copy)
    through: str                      # what the bytes went through: "shared_memory" (a multiprocessing.shared_memory
                                      # segment, both engines in this process) or "simulated" (nothing copied)

    def to_dict(self) -> dict:
        return {"request": self.request, "prefill": self.prefill, "decode": self.decode, "blocks": self.blocks,
                "bytes": self.bytes, "ms": round(self.ms, 3), "start_ms": round(self.start_ms, 3),
                "src": list(self.src), "dst": list(self.dst), "through": self.through}


@dataclass(frozen=True)
class StepRecord:
    lane: str
    step: int                           # 1-based
    slots: tuple[SlotRecord, ...]
    waiting: tuple[str, ...] = ()       # arrived, not running, after this step's admissions
    admitted: tuple[str, ...] = ()      # took a slot this step
    finished: tuple[str, ...] = ()      # wrote their last token this step
    returned: tuple[str, ...] = ()      # their responses went back to the client this step
    preempted: tuple[str, ...] = ()     # evicted this step (back to the waiting queue, recomputed later; a swapped-out
                                        # request is not here: its cell is SWAPPED and kv_swapped counts its blocks)
    kv_used: int = 0                    # KV tokens held by the slots once this step computed (before any leave)
    kv_capacity: int = 0                # KV tokens the lane may hold
    kv_blocks_used: int = 0             # blocks of `kv_block_size` tokens held at the same moment
    kv_blocks_total: int = 0            # blocks in the lane's budget (0: no block budget)
    kv_blocks_cached: int = 0           # prefix cache: cached blocks no running request holds (counted free,
                                        # evicted LRU when room is needed; not in kv_used or kv_blocks_used)
    start_ms: float = 0.0               # the lane clock when the step started: the lane's earlier step times plus
                                        # the time it waited for arrivals (a gap after the previous step)
    ms: float = 0.0                     # how long the step lasted: its measured wall time (synchronized on CUDA);
                                        # a step that computed nothing (Forward.NONE), the lane's median step;
                                        # on the simulator, its cost model
    forward_ms: float = 0.0             # of which inside the model's forward calls
    forward: Forward = Forward.NONE     # which forward calls the step made (prefill, decode, split, fused, none)
    simulated: bool = False             # the simulator's step: no model ran, `ms` is its cost model's
    # the memory map, as changes (each written by to_dict only when non-empty): the lane's block tables after the
    # step (after finished requests left). A reader applies kv_dropped first, then kv_tables.
    kv_tables: dict[str, list[int]] | None = None   # requests whose device block table changed: the whole new table
    kv_dropped: tuple[str, ...] = ()    # requests whose device blocks were all released (finished, preempted,
                                        # swapped out, cancelled since the previous step)
    kv_cached: tuple[int, ...] | None = None  # when it changed: every cached block no request holds (None: unchanged)
    kv_swapped: dict[str, int] | None = None  # requests whose host-pool holding changed: host blocks held now (0: none)
    kv_tokens: dict[str, int] | None = None   # every request holding device blocks: tokens whose K/V they hold
    copy_ms: float = 0.0                # of `ms`, the time of this step's block copies (swap out/in, copy-on-write)
    # a tensor-parallel lane (engine/worker/tensor_parallel.py): its forward split, the mean over its ranks (None: a
    # lane of one process). compute is the rank's forward less its all-reduces (the lm_head's gather is compute here)
    compute_ms: float | None = None     # of `forward_ms`, computing on the rank's shard of the weights
    allreduce_ms: float | None = None   # of `forward_ms`, inside all-reduces (2 a layer: after o_proj, after down_proj),
                                        # waiting for the slowest rank included
    allreduces: int | None = None       # how many all-reduces the step's forward calls made
    placement: dict | None = None       # a split lane's machine statement, on its first record only: its processes,
                                        # cores, memory domains, transport (engine/report/placement.py)
    kv_pool: dict | None = None         # the lane's KV facts, on its first record only: kv_bytes (its device K/V
                                        # tensors), num_blocks, block_size, host_blocks, kv_allocation, preemption
    waits: dict[str, dict] = field(default_factory=dict)  # every id in `waiting` -> why it was not admitted
                                        # (engine/waits.py Wait.to_dict: {"reason": "kv_blocks", "short": 3})
    # a fleet (a data-parallel lane, engine/fleet.py): its own `slots` are empty; each replica's step is a whole
    # lane record of its own, and start_ms/ms span the replicas' steps
    replicas: tuple["StepRecord | None", ...] | None = None  # per replica: its record of this fleet step (None:
                                        # it did not step); None: not a fleet
    routes: tuple[Route, ...] = ()      # the router's decisions since the previous fleet step, in arrival order
    # a P/D lane (engine/disaggregation.py) is drawn like a fleet: `replicas` holds its prefill engines' records, then
    # its decode engines'; `routes` sends arrivals to prefill engines
    roles: tuple[str, ...] = ()         # per replica: "prefill" or "decode" (): not a P/D lane
    transfers: tuple[Transfer, ...] = ()  # the hand-offs this step made (KV blocks copied prefill -> decode)

    def to_dict(self) -> dict:
        d = asdict(self if self.replicas is None else replace(self, replicas=None, routes=(), transfers=()))
        if self.replicas is not None:  # each replica's record as any lane's, the routes as they say themselves
            d["replicas"] = [None if r is None else r.to_dict() for r in self.replicas]
            d["routes"] = [route.to_dict() for route in self.routes]
            d["transfers"] = [t.to_dict() for t in self.transfers]
        d["slots"] = [s.to_dict() for s in self.slots]
        d["forward"] = Forward(self.forward).value
        for key in ("waiting", "admitted", "finished", "returned", "preempted"):
            d[key] = list(d[key])
        d["start_ms"] = round(self.start_ms, 3)
        d["ms"] = round(self.ms, 3)
        d["forward_ms"] = round(self.forward_ms, 3)
        for key in ("kv_tables", "kv_dropped", "kv_swapped", "kv_tokens"):  # stored runs stay small: only changes
            if not d[key]:
                del d[key]
            elif key == "kv_dropped":
                d[key] = list(d[key])
        if self.kv_pool is None:
            del d["kv_pool"]
        if self.placement is None:
            del d["placement"]
        if self.kv_cached is None:
            del d["kv_cached"]
        else:
            d["kv_cached"] = list(self.kv_cached)
        if self.copy_ms:
            d["copy_ms"] = round(self.copy_ms, 3)
        else:
            del d["copy_ms"]
        for key in ("compute_ms", "allreduce_ms", "allreduces"):  # a lane of one process says nothing of ranks
            if d[key] is None:
                del d[key]
            elif key != "allreduces":
                d[key] = round(d[key], 3)
        if not self.waits:  # written only when someone waits: stored runs stay small
            del d["waits"]
        if self.replicas is None:  # a lane of one engine says nothing of fleets
            del d["replicas"], d["routes"]
        if not self.roles:  # nor a fleet of P/D
            del d["roles"], d["transfers"]
        else:
            d["roles"] = list(self.roles)
        return d


def tick_ms(records: dict) -> float:
    """A tick's time on the shared clock: its longest step (a lane that did not step, None, takes none)."""
    return max((rec.ms for rec in records.values() if rec is not None), default=0.0)
