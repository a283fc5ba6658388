"""Computing: the runners (the real model, the simulator) and everything that touches tensors.

This folder is the torch line: no module outside engine/worker/ imports torch (tests/test_structure.py), and this
file, the door, imports none of it: `Runner` is what the lane asks of a runner, whichever computes the rows.
`ModelRunner` (runner.py) runs a real model over a paged KV cache; `SimRunner` (sim.py) writes placeholder tokens
with step times from a cost model. The vLLM lane (engine/peers/) has a model of its own and is a lane, not a
runner (engine/lane.py `SteppedLane`).
"""
from typing import Protocol, runtime_checkable

from engine.request import Request
from engine.sched.batch import ForwardResult, Row


@runtime_checkable
class Runner(Protocol):
    simulated: bool     # True: tokens are placeholders and step times come from a cost model
    kv_bytes: int       # bytes of the K/V pool this runner allocated (or would, for the simulator)

    def run(self, rows: list[Row], swap_out=(), swap_in=(), copies=()) -> ForwardResult:
        """Compute the rows the scheduler decided (and the block copies it asked for); one token per row that
        wants one."""
        ...

    def reference_ms(self) -> float:
        """A step's typical time on this runner: what a step that computed nothing is charged on a step clock."""
        ...

    def is_special(self, token_id: int) -> bool:
        """The token is one of the tokenizer's special tokens (<|im_end|>, ...)."""
        ...

    def text_delta(self, request: Request, upto: int | None = None, final: bool = False) -> str | None:
        """The text the request's newest tokens (those before `upto`) add to its response, decoding only those
        (None: no tokenizer); an incomplete UTF-8 character is held back, unless `final` (its last token)."""
        ...
