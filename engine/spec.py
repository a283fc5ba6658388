"""What a client asked for: a request's spec, immutable and shared by every lane, and the KV rows it may need.

This is what crosses from the web wing into the engine (the engine's `Request` never crosses back: the step record
does). Nothing here knows a scheduler, a tensor or a lane.
"""
from dataclasses import dataclass


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
    grammar: str | None = None  # structured output: an llguidance grammar (engine.structured's text) every written
                                # token keeps to, compiled where the model is (engine.worker.grammar)
    session: str | None = None  # the conversation it belongs to: a fleet's consistent_hash router keys on it, as
                                # vllm-router keys on an X-Session-ID header (None: on the prompt's text)
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
