"""The data a step passes between the scheduler, the runner and the lane: rows in, tokens out, what was kept.

`Row` and `SchedulerOutput` are what `Scheduler.schedule` decides (built on a `StepPlan`); `ForwardResult` is what a
runner computed for those rows; `StepUpdate` what the scheduler kept of it. Plain dataclasses: this module knows no
tensors, no policies and no models; it does not know how a row is computed or chosen.
"""
from dataclasses import dataclass, field

from engine.request import Request
from engine.step import Forward, SlotState
from engine.waits import Wait


@dataclass
class Row:
    """One batch row of a step: what the runner must compute for one slot."""
    slot: int
    request: Request
    state: SlotState           # PREFILL, DECODE or PADDING
    token_ids: list[int]       # tokens fed this step
    start: int                 # cache position of token_ids[0]; the row's KV length before the step
    wants_token: bool          # sample a token from the last position (False for a partial prefill chunk)
    proposed: int = 0          # a speculative decode row: its last `proposed` tokens are guesses to verify
    blocks: tuple[int, ...] = ()  # its block table: position p lives in block blocks[p // block_size] at offset
                                  # p % block_size; covers [0, start + len(token_ids)) after this step's growth


@dataclass
class SchedulerOutput:
    step: int                                                # 1-based step this output is for
    rows: list[Row]                                          # computed rows, in slot order
    stalled: list[Request] = field(default_factory=list)     # hold a slot, got no tokens this step
    admitted: list[Request] = field(default_factory=list)    # took a slot this step
    preempted: dict[int, Request] = field(default_factory=dict)  # slot -> request evicted this step
    swapped: list[Request] = field(default_factory=list)         # ...of which swapped out (not recomputed later)
    # block copies the runner applies before the forward, in this order (swap out, swap in, copy-on-write)
    swap_out: list[tuple[int, int]] = field(default_factory=list)  # (device block, host block)
    swap_in: list[tuple[int, int]] = field(default_factory=list)   # (host block, device block)
    copies: list[tuple[int, int]] = field(default_factory=list)    # (device src, device dst)
    waits: dict[str, Wait] = field(default_factory=dict)     # request id -> why it still waits after admissions


@dataclass
class ForwardResult:
    tokens: dict[int, int | list[int] | None]  # slot -> sampled token id (a speculative row: the tokens it writes)
    forward_ms: float              # time inside forward calls (synchronized on CUDA)
    forward: Forward               # which calls: NONE, PREFILL, DECODE, SPLIT (two calls) or FUSED (one call, both kinds)
    copy_ms: float = 0.0           # time of the step's block copies (swap out/in, copy-on-write), before the forward
    tp: dict | None = None         # a tensor-parallel runner's split of the forward: compute_ms, allreduce_ms, allreduces
                                   # (mean over its ranks; engine/worker/tensor_parallel.py); None: one process
    pp: dict | None = None         # a pipeline-parallel runner's stage x time grid and bubbles (StepRecord's stage_grid,
                                   # micro_batches, bubble_fraction, bubble_formula); None: one process


def call_kind(calls: int, prefills: bool) -> Forward:
    """What an unfused step's calls were: a prefill call and a decode call, or one of either kind."""
    return Forward.SPLIT if calls == 2 else Forward.PREFILL if prefills else Forward.DECODE


@dataclass
class StepPlan:
    """The step `Scheduler.schedule` is building, passed to every helper that adds to it (the scheduler keeps
    no per-step state of its own): the output so far and the tokens the step may still compute."""
    out: SchedulerOutput
    token_budget: int | None       # tokens left under max_batch_tokens (None: no cap)

    def add(self, row: Row) -> None:
        self.out.rows.append(row)
        if self.token_budget is not None:
            self.token_budget -= len(row.token_ids)


@dataclass
class StepUpdate:
    """What `Scheduler.update_from_output` decided from the runner's tokens (which it leaves as they were)."""
    written: dict[int, int | list[int]]      # slot -> what its row wrote: a token id, or a verified row's kept tokens
                                             # (cut at EOS or max_new_tokens); rows that wanted no token are absent
    texts: dict[int, str | None] = field(default_factory=dict)  # slot -> the text its tokens add to the response
                                             # (None: no tokenizer); the same rows as `written`
