"""Why a waiting request was not admitted in a step: the vocabulary (`WaitReason`) and one fact per waiter (`Wait`).

The policies (engine/sched/policies.py) decide admission, and for every request they leave waiting they say why; the lane
writes it into the step record (`StepRecord.waits`: request id -> `Wait.to_dict()`). A request not yet arrived is not
waiting and has no reason. This module knows reasons and numbers only: no slots, blocks, policies or tensors. The
strings are the wire vocabulary; static/js/core/waits.js is the page's twin (tests/engine/sched/test_waits.py holds them equal).
"""
from dataclasses import dataclass
from enum import Enum


class WaitReason(str, Enum):
    NO_SLOT = "no_slot"                # every slot is held (by running requests, or by those admitted before it)
    KV_BLOCKS = "kv_blocks"            # its next prompt chunk needs `short` more free KV blocks than there are
    TOKEN_BUDGET = "token_budget"      # the rows before it spent the step's max_batch_tokens
    GROUP_NOT_FULL = "group_not_full"  # static: its group starts when all its members arrived; `missing` have not
    GROUP_RUNNING = "group_running"    # static, dynamic: the running group holds the lane until its longest is done
    DEADLINE = "deadline"              # dynamic: fewer than `slots` wait, and the oldest waited less than max_wait:
                                       # `left` more steps (ms, with arrivals in ms) until the group starts anyway
    BEHIND = "behind"                  # it would fit, but `ahead`, first in admission order (a higher priority, an
                                       # earlier arrival, a shorter job), waits for KV blocks, and no one overtakes
    SWAPPED = "swapped"                # swapped out (preemption "swap"): waits for `short` free blocks to swap in
    SIBLING = "sibling"                # a parallel sample: waits for its group leader's (`ahead`) prompt


@dataclass(frozen=True)
class Wait:
    """Why one request waits after a step's admissions."""
    reason: WaitReason
    short: int | None = None     # kv_blocks, swapped: free KV blocks it lacks ("3 KV blocks short")
    ahead: str | None = None     # behind: the request first in line; sibling: its group's leader
    missing: int | None = None   # group_not_full: members of its group not yet arrived
    left: float | None = None    # deadline: steps (or ms) until the oldest waiter has waited max_wait

    def __post_init__(self):
        assert self.short is None or self.short > 0, f"a KV shortfall of {self.short} blocks is no shortfall"

    def to_dict(self) -> dict:
        """Only the numbers its reason has: {"reason": "kv_blocks", "short": 3}."""
        d = {"reason": self.reason.value}
        for key in ("short", "ahead", "missing", "left"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d
