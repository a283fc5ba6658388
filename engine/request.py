"""A request as one lane's scheduler sees it: its spec, its status and every per-request fact.

Each lane gets its own `Request` objects (built from the same `RequestSpec`), so lanes never share
mutable state. Nothing here touches tensors.
"""
from dataclasses import dataclass, field
from enum import Enum

from engine.step import StopReason


class RequestStatus(str, Enum):
    PENDING = "pending"      # not yet arrived
    WAITING = "waiting"      # arrived, queued for a slot
    RUNNING = "running"      # holds a slot, prefilling or decoding
    FINISHED = "finished"    # wrote its last token (a static group may still hold its row as padding)
    RETURNED = "returned"    # its response went back to the client


@dataclass(frozen=True)
class RequestSpec:
    """What a client asked for; immutable and shared by every lane."""
    id: str
    prompt: str
    max_new_tokens: int
    ignore_eos: bool = True
    arrival: int = 0            # step arrivals: the first 0-based step in which it may be scheduled
    arrival_ms: float | None = None  # arrivals in ms: it may be scheduled in the first step that starts at or
                                     # after this time on the lane's clock (None: the workload counts steps)
    priority: int = 0           # higher is admitted first under the `priority` policy
    prompt_ids: tuple[int, ...] = ()  # the chat-templated prompt, filled in by the runner's tokenizer
    temperature: float = 0.0    # 0: greedy (token-exact with generate()); else sample from softmax(logits / T)
    top_p: float = 1.0          # sample from the smallest set of tokens whose probability reaches top_p
    seed: int | None = None     # a sampled request's own random stream: the same text whatever it is batched with
    stop: tuple[str, ...] = ()  # finish as soon as the text holds one of these strings
    min_tokens: int = 0         # EOS cannot be written before this many tokens (its logits masked, as vLLM does)
    logprobs: int | None = None         # report each written token's logprob and this many top alternatives
    prompt_logprobs: int | None = None  # ...and each prompt token's (echo); such a request takes no prefix cache hit
    grammar: object = None      # a compiled grammar (engine.worker.grammar): every written token keeps to it (JSON output)
    group: str | None = None    # parallel sampling: the request whose `n` samples its siblings are (engine.workload.siblings;
                                # its id is "<group>·i"); the first of them leads, the others fork its prompt
                                # blocks; None: a request of its own


def max_row_len(spec: RequestSpec, steps: int | None = None) -> int:
    """The most KV tokens a row can hold after `steps` steps of its request (default: max_new_tokens):
    the prompt, then one fed-back token per step after the first; the last token is never fed back."""
    return len(spec.prompt_ids) + (spec.max_new_tokens if steps is None else steps) - 1


def row_capacity(specs: list[RequestSpec]) -> int:
    """KV tokens one slot must hold for any request of `specs`, and for padding until a group's end."""
    return max(len(s.prompt_ids) for s in specs) + max(s.max_new_tokens for s in specs)


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
    rng: object = None                          # a sampled request's random generator (the runner's to make)
    num_from_cache: int = 0                     # prefix cache: prompt tokens its latest (re)start took from the cache
    cache_hit_step: int | None = None           # ...in this step
    token_logprobs: list = field(default_factory=list)  # engine.worker.logprobs.Entry per output token (spec.logprobs set)
    prompt_logprobs: list = field(default_factory=list)  # an Entry (or None for the first) per prompt token
    matcher: object = None                      # a constrained request's grammar matcher (engine.worker.grammar's to make)

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
