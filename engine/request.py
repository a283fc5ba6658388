"""A request as one lane's scheduler sees it: its spec, its status and every per-request fact.

Each lane gets its own `Request` objects (built from the same `RequestSpec`), so lanes never share
mutable state. Nothing here touches tensors.
"""
from dataclasses import dataclass, field
from enum import Enum

from engine.spec import RequestSpec, max_row_len, row_capacity  # noqa: F401 (older imports find them here too)
from engine.step import StopReason


class RequestStatus(str, Enum):
    PENDING = "pending"      # not yet arrived
    WAITING = "waiting"      # arrived, queued for a slot
    RUNNING = "running"      # holds a slot, prefilling or decoding
    FINISHED = "finished"    # wrote its last token (a static group may still hold its row as padding)
    RETURNED = "returned"    # its response went back to the client


@dataclass
class Request:
    spec: RequestSpec
    order: int                                  # position in the workload, the arrival tie-break
    status: RequestStatus = RequestStatus.PENDING
    slot: int | None = None
    output_ids: list[int] = field(default_factory=list)
    num_cached: int = 0                         # tokens of this request's row held in the KV cache
    num_prefilled: int = 0                      # tokens of `prefill_ids` already in the cache
    prefill_ids: list[int] = field(default_factory=list)  # what the next prefill must read
    admitted_step: int | None = None
    first_token_step: int | None = None
    finish_step: int | None = None
    return_step: int | None = None
    stop: StopReason | None = None
    num_preemptions: int = 0
    text: str = ""                              # detokenized output so far (including special tokens)
    text_prefix: int = 0                        # output tokens before the window the next decode reads (worker.detok)
    text_read: int = 0                          # output tokens whose text is in `text`
    rng: object = None                          # a sampled request's random generator (the runner's to make)
    num_from_cache: int = 0                     # prefix cache: prompt tokens its latest (re)start took from the cache
    cache_hit_step: int | None = None           # ...in this step
    token_logprobs: list = field(default_factory=list)  # engine.worker.logprobs.Entry per output token (spec.logprobs set)
    prompt_logprobs: list = field(default_factory=list)  # an Entry (or None for the first) per prompt token
    handoff_at: float | None = None             # a P/D lane's decode engine: when its KV copy was done and it may be
                                                # queued there (lane-clock ms, or a 0-based step on a step clock)
    matcher: object = None                      # a constrained request's llguidance matcher (engine.worker.grammar's to make)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def num_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def is_prefilling(self) -> bool:
        return self.num_prefilled < len(self.prefill_ids)

    @property
    def is_finished(self) -> bool:
        return self.status in (RequestStatus.FINISHED, RequestStatus.RETURNED)

    def start_prefill(self) -> None:
        """(Re)start from an empty row: the prompt plus anything written before a preemption."""
        self.prefill_ids = list(self.spec.prompt_ids) + self.output_ids
        self.num_prefilled = 0
        self.num_cached = 0
