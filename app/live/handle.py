"""The gateway's handle on the live lane: exactly what app.live.gateway and the OpenAI endpoint ask of it.

In one process the engine worker's live driver (app.runs.live_driver.LiveDriver) implements it: it makes the
lane once the model is ready, steps it between page ticks, and tokenizes with the engine. The gateway never
sees the worker, the engine or the lane's scheduler. Calls come from HTTP handler threads; the lane applies
them at its next step, on the worker's thread.
"""
from typing import Protocol

from engine.spec import RequestSpec
from engine.step import StepRecord


class LaneHandle(Protocol):
    def ready(self) -> bool:
        """Whether the lane takes requests now (the model is loaded; the lane is made on the first ask)."""
    def not_ready_reason(self) -> str:
        """Why it does not, as a person reads it (the model's loading message or error)."""
    def model(self) -> str:
        """The model's name, as the Live view shows it."""
    def submit(self, spec: RequestSpec, listener) -> float:
        """Queue a tokenized request; `listener(record, cell)` hears each step it took part in, with its cell there
        ((None, None): dropped). Returns its arrival, ms."""
    def wake(self) -> None:
        """Have the worker look for live work now."""
    def cancel(self, request_id: str) -> None: ...
    def queued(self) -> int:
        """Requests waiting for a slot (handed in, not yet admitted nor ended), counted under a lock."""
    def load(self) -> dict:
        """{running, waiting, kv_used, kv_capacity} now, from the lane's state after its latest step or drain."""
    def failure(self) -> str | None:
        """Why the step that dropped its requests failed, while their listeners hear it (else None)."""
    def decode(self, ids: list[int]) -> str:
        """Output ids as text, special tokens left out ("" on the simulator)."""
    def now_ms(self) -> float:
        """The lane's clock: ms since it opened."""
    def slots(self) -> int: ...
    def traits(self) -> dict:
        """Its batching policy's traits (engine.sched.scheduler.Traits.to_dict): what the Live view says the lane is."""
    def options(self) -> dict:
        """How it batches (engine.live.LiveLane.options): slots, token budget, chunk, fused, prefix cache, KV."""
    def row_len(self) -> int:
        """The most tokens (prompt + output) one request may hold."""
    def recent(self) -> list[StepRecord]:
        """Its latest step records, oldest first."""
    def encode_chat(self, messages: list[dict], prompt: str) -> list[int] | None:
        """A chat's prompt ids (None: no model yet)."""
    def encode_text(self, prompt: str) -> list[int] | None:
        """A plain prompt's ids (None: no model yet)."""
    def tokenize(self, prompt: str, add_special_tokens: bool) -> list[int] | None:
        """A text's ids, with or without special tokens (None: no model yet)."""
    def detokenize(self, ids: list[int]) -> str | None:
        """Ids as text, special tokens kept (None: no model yet; ValueError: an id outside the vocabulary)."""
    def token_texts(self, ids: list[int]) -> list[str]:
        """Each id decoded alone, special tokens kept (how logprobs name their tokens)."""
    def handoffs(self) -> list[dict]:
        """A served P/D pair's hand-offs whose first decode step ended since the last call ({request, blocks, bytes,
        ttft_parts}); [] for a colocated lane."""
    def vocab_size(self) -> int | None:
        """Token ids below this are valid prompt ids (None: the simulator, which has no logits either)."""
