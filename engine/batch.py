"""The data a step passes between the scheduler, the runner and the lane: rows in, tokens out.

`Row` and `SchedulerOutput` are what `Scheduler.schedule` decides; `ForwardResult` is what a runner computed
for those rows. Plain dataclasses: this module knows no tensors, no policies and no models.
"""
from dataclasses import dataclass, field

from .request import Request
from .step import Forward, SlotState


@dataclass
class Row:
    """One batch row of a step: what the runner must compute for one slot."""
    slot: int
    request: Request
    state: SlotState           # PREFILL, DECODE or PADDING
    token_ids: list[int]       # tokens fed this step
    start: int                 # cache position of token_ids[0]; the row's KV length before the step
    wants_token: bool          # sample a token from the last position (False for a partial prefill chunk)
    load: tuple[tuple[int, int], ...] = ()  # prefix cache hit: (cached block id, first position) to copy into
                                            # the slot's row before the forward
    save: tuple[tuple[int, int], ...] = ()  # (block id, first position) of new full prompt blocks to keep in the
                                            # prefix cache after the forward
    proposed: int = 0          # a speculative decode row: its last `proposed` tokens are guesses to verify


@dataclass
class SchedulerOutput:
    step: int                                                # 1-based step this output is for
    rows: list[Row]                                          # computed rows, in slot order
    stalled: list[Request] = field(default_factory=list)     # hold a slot, got no tokens this step
    admitted: list[Request] = field(default_factory=list)    # took a slot this step
    preempted: dict[int, Request] = field(default_factory=dict)  # slot -> request evicted this step


@dataclass
class ForwardResult:
    tokens: dict[int, int | list[int] | None]  # slot -> sampled token id (a speculative row: the tokens it writes)
    forward_ms: float              # time inside forward calls (synchronized on CUDA)
    forward: Forward               # which calls: NONE, PREFILL, DECODE, SPLIT (two calls) or FUSED (one call, both kinds)
    filler_slots: tuple[int, ...] = ()  # idle slots computed as throwaway rows to speed a decode call up


def call_kind(calls: int, prefills: bool) -> Forward:
    """What an unfused step's calls were: a prefill call and a decode call, or one of either kind."""
    return Forward.SPLIT if calls == 2 else Forward.PREFILL if prefills else Forward.DECODE
