"""The three batching policies. Each only says who takes a slot, who is evicted and when a slot is
given back; everything else is the shared `Scheduler`.

- static:     fixed groups of `slots` in arrival order; a group starts when all its members have
              arrived and the previous group is done, and holds every row until its longest member
              is done (finished members are still computed, as padding).
- dynamic:    like static, but a group starts as soon as `slots` requests wait or the oldest waiter
              has waited `max_wait` steps (`max_wait_ms` with arrivals in ms), with whoever is there.
- continuous: every step finished requests leave and waiting requests take the free slots; under
              a KV budget the lowest-precedence running request is preempted and recomputed later.

They never see a tensor and never build a row themselves (the shared `Scheduler` does, on the step's `StepPlan`).
"""
from .admission import ORDERS
from .block_manager import blocks_for
from .request import Request, RequestStatus, max_row_len
from .batch import StepPlan
from .scheduler import Scheduler, Traits
from .waits import Wait, WaitReason


class StaticScheduler(Scheduler):
    lane = "static"
    traits = Traits(
        label="Static batching", admits="group", waits_for="full", preempts=False, options=(),
        description="Fixed groups of `slots` in arrival order; a group starts when all its members have arrived and "
                    "holds every row until its longest member is done (finished rows are computed as padding).")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.group: list[Request] = []

    def candidates(self) -> list[Request] | None:
        """The next group, or None if it may not start yet: the next `slots` requests in arrival order."""
        group = (self.waiting + self.pending)[:self.config.slots]
        group = self.fit(group)
        return group if all(r.status is RequestStatus.WAITING for r in group) else None

    def fit(self, group: list[Request]) -> list[Request]:
        """The longest prefix of `group` whose worst case fits the KV budget: every row is computed until
        the group's longest member could be done."""
        if self.blocks.num_blocks is None:
            return group
        for k in range(len(group), 0, -1):
            if self.worst_case_blocks(group[:k]) <= self.blocks.num_blocks:
                return group[:k]
        raise AssertionError(f"request {group[0].id} can never fit the KV budget; the workload check must refuse it")

    def worst_case_blocks(self, group: list[Request]) -> int:
        """KV blocks `group` needs if every row is computed until its longest member could be done."""
        steps = max(r.spec.max_new_tokens for r in group)
        return sum(blocks_for(max_row_len(r.spec, steps), self.blocks.block_size) for r in group)

    def can_admit(self) -> bool:
        return not self.group and bool(self.candidates())

    def admit(self, plan: StepPlan) -> list[Request]:
        if self.group:
            plan.out.waits.update((r.id, Wait(WaitReason.GROUP_RUNNING)) for r in self.waiting)
            return []
        group = self.candidates() if self.waiting else None
        if not group:
            plan.out.waits.update((r.id, self.not_started()) for r in self.waiting)
            return []
        for slot, r in enumerate(group):
            self.place(plan, r, slot)
        self.group = group
        self.note_left_out(plan, group)
        return group

    def not_started(self) -> Wait:
        """Why the next group may not start while nothing runs: some of its members have not arrived."""
        group = self.fit((self.waiting + self.pending)[:self.config.slots])
        return Wait(WaitReason.GROUP_NOT_FULL, missing=sum(r.status is RequestStatus.PENDING for r in group))

    def note_left_out(self, plan: StepPlan, group: list[Request]) -> None:
        """Why the waiters a starting `group` left out wait: the group's KV worst case would pass the budget with
        them (by `short` blocks), or its `slots` are all taken."""
        for i, r in enumerate(self.waiting):
            if len(group) + i >= self.config.slots:
                plan.out.waits[r.id] = Wait(WaitReason.NO_SLOT)
            else:
                short = self.worst_case_blocks(group + self.waiting[:i + 1]) - self.blocks.num_blocks
                plan.out.waits[r.id] = Wait(WaitReason.KV_BLOCKS, short=short)

    def release(self) -> list[Request]:
        # the whole group returns together when its longest member is done, as generate() does
        if not self.group or not all(r.is_finished for r in self.group):
            return []
        returned, self.group = self.group, []
        for r in returned:
            self.give_back(r)
        return returned


class DynamicScheduler(StaticScheduler):
    lane = "dynamic"
    traits = Traits(
        label="Dynamic batching", admits="group", waits_for="full_or_deadline", preempts=False,
        options=("max_wait", "max_wait_ms"),
        description="Like static, but a group starts as soon as `slots` requests wait or the oldest has waited "
                    "max_wait, with whoever is there.")

    @property
    def max_wait(self) -> float:
        return self.config.max_wait_ms if self.timed else self.config.max_wait

    def candidates(self) -> list[Request] | None:
        if len(self.waiting) < self.config.slots and self.now < self.deadline():
            return None
        return self.fit(self.waiting[:self.config.slots])

    def deadline(self) -> float:
        """When the oldest waiter has waited max_wait."""
        return self.arrival_of(self.waiting[0]) + self.max_wait  # computed as next_event does: no rounding gap

    def not_started(self) -> Wait:
        return Wait(WaitReason.DEADLINE, left=round(self.deadline() - self.now, 3))

    def next_event(self) -> float | None:
        """The next arrival, or the moment the oldest waiter has waited `max_wait`, whichever is first."""
        events = [t for t in (super().next_event(),) if t is not None]
        if self.waiting and not self.group:
            events.append(self.arrival_of(self.waiting[0]) + self.max_wait)
        return min(events, default=None)


class ContinuousScheduler(Scheduler):
    lane = "continuous"
    traits = Traits(
        label="Continuous batching", admits="slot", waits_for=None, preempts=True,
        options=("scheduling_policy", "chunk_size", "max_batch_tokens", "prefix_cache"),
        description="Every step finished requests leave and waiting requests take the free slots; under a KV "
                    "budget the least entitled running request is preempted and recomputed later.")

    def precedence(self, r: Request) -> tuple:
        """Sort key, first = most entitled: the admission order's rank (priority: higher first), then earlier
        admission."""
        return *ORDERS[self.config.scheduling_policy].rank(r), r.admitted_step, r.order

    def queue(self) -> list[Request]:
        """The waiting requests in admission order (a stable sort: arrival order on equal keys)."""
        return sorted(self.waiting, key=ORDERS[self.config.scheduling_policy].queue_key)

    def make_room(self) -> dict[int, Request]:
        """Preempt the least entitled running request until every running request can write one more token."""
        preempted = {}
        running = sorted((r for r in self.slots if r is not None), key=self.precedence)
        while self.blocks.num_blocks is not None and running:
            need = sum(self.blocks.extra_blocks(r, r.num_cached + 1) for r in running)
            if need <= self.blocks.num_free:
                break
            victim = running.pop()
            preempted[victim.slot] = victim
            self.preempt(victim)
        return preempted

    def preempt(self, r: Request) -> None:
        self.slots[r.slot] = None
        self.blocks.free(r)
        r.slot = None
        r.status = RequestStatus.WAITING
        r.num_preemptions += 1
        r.start_prefill()  # recompute prompt + tokens written so far when it runs again
        self.waiting.insert(0, r)

    def admit(self, plan: StepPlan) -> list[Request]:
        admitted, queue = [], self.queue()
        for i, r in enumerate(queue):
            wait = self.why_not(plan, r)
            if wait is not None:  # head of line: the rest wait too, rather than let a later request overtake
                self.note_behind(plan, queue[i:], wait)
                break
            self.place(plan, r, self.open_slots(plan)[0])
            admitted.append(r)
        return admitted

    def open_slots(self, plan: StepPlan) -> list[int]:
        return [s for s in self.free_slots() if s not in plan.out.preempted]

    def why_not(self, plan: StepPlan, r: Request) -> Wait | None:
        """Why `r` may not be admitted into `plan`'s step now; None: it may."""
        if not self.open_slots(plan):
            return Wait(WaitReason.NO_SLOT)
        if plan.token_budget is not None and plan.token_budget <= 0:
            return Wait(WaitReason.TOKEN_BUDGET)
        n = self.prefill_room(r, plan)
        if n == 0 or not self.leaves_headroom(r, n):
            return Wait(WaitReason.KV_BLOCKS, short=self.kv_short(r, plan))
        return None

    def kv_short(self, r: Request, plan: StepPlan) -> int:
        """Free blocks `r` lacks to be admitted: those its next chunk needs plus leaves_headroom's one per running
        request, less the free ones."""
        running = sum(1 for s in self.slots if s is not None)
        need = self.blocks.extra_blocks(r, r.num_cached + self.prefill_want(r, plan)) + running
        return need - self.blocks.num_free

    def note_behind(self, plan: StepPlan, line: list[Request], head: Wait) -> None:
        """`line[0]` waits for `head`; a slot or a token budget is lacking for the rest as well, but KV blocks are
        its own need: a request behind it that would fit waits behind it."""
        plan.out.waits[line[0].id] = head
        for r in line[1:]:
            wait = head if head.reason is not WaitReason.KV_BLOCKS else self.why_not(plan, r)
            plan.out.waits[r.id] = wait or Wait(WaitReason.BEHIND, ahead=line[0].id)

    def leaves_headroom(self, r: Request, n: int) -> bool:
        """Whether admitting `r` with an `n`-token chunk still leaves one free block per running request, so
        that their next decode does not at once preempt the newcomer (which would thrash: admit, evict, repeat)."""
        free = self.blocks.num_free
        if free is None:
            return True
        running = sum(1 for s in self.slots if s is not None)
        return free - self.blocks.extra_blocks(r, r.num_cached + n) >= running

    def release(self) -> list[Request]:
        returned = [r for r in self.slots if r is not None and r.is_finished]
        for r in returned:
            self.give_back(r)
        return returned


# The batching policies, in the order the page stacks their lanes.
POLICIES: dict[str, type[Scheduler]] = {cls.lane: cls for cls in (StaticScheduler, DynamicScheduler, ContinuousScheduler)}


def policy_traits() -> dict[str, dict]:
    """{policy: its traits} in page order: what the run announcement and the page's catalog carry."""
    return {name: cls.traits.to_dict() for name, cls in POLICIES.items()}


def options_only_for() -> dict[str, tuple[str, ...]]:
    """{option: the policies that take it}, for the options some policies do not take (a lane of another policy
    that sets one is refused)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, cls in POLICIES.items():
        for option in cls.traits.options:
            out[option] = out.get(option, ()) + (name,)
    return out
