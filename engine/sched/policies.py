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
from engine.admission import ORDERS
from engine.kv.block_manager import blocks_for
from engine.request import Request, RequestStatus, max_row_len
from engine.sched.batch import StepPlan
from engine.sched.scheduler import Scheduler, Traits
from engine.waits import Wait, WaitReason


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
        if not self.blocks.budgeted:
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
        options=("scheduling_policy", "chunk_size", "max_batch_tokens", "prefix_cache", "preemption"),
        description="Every step finished requests leave and waiting requests take the free slots; under a KV "
                    "budget the least entitled running request is preempted: recomputed later, or swapped out.")

    def precedence(self, r: Request) -> tuple:
        """Sort key, first = most entitled: the admission order's rank (priority: higher first), then earlier
        admission."""
        return *ORDERS[self.config.scheduling_policy].rank(r), r.admitted_step, r.order

    def queue(self) -> list[Request]:
        """The waiting requests in admission order (a stable sort: arrival order on equal keys)."""
        return sorted(self.waiting, key=ORDERS[self.config.scheduling_policy].queue_key)

    def make_room(self, plan: StepPlan) -> dict[int, Request]:
        """Preempt the least entitled running request until every running request can write one more token."""
        preempted = {}
        running = sorted((r for r in self.slots if r is not None), key=self.precedence)
        while self.blocks.budgeted and running:
            need = sum(self.blocks.extra_blocks(r, r.num_cached + 1) for r in running)
            if need <= self.blocks.num_free:
                break
            victim = running.pop()
            preempted[victim.slot] = victim
            self.preempt(victim, plan)
        return preempted

    def preempt(self, r: Request, plan: StepPlan) -> None:
        """Evict `r`: swap its blocks out to the host pool (it resumes where it stopped), or free them (it recomputes
        its prompt and tokens so far when it runs again)."""
        self.slots[r.slot] = None
        r.slot = None
        r.status = RequestStatus.WAITING
        r.num_preemptions += 1
        if self.config.preemption == "swap" and self.blocks.can_swap_out(r):
            plan.out.swap_out += self.blocks.swap_out(r)
            plan.out.swapped.append(r)
        else:
            self.blocks.free(r)
            r.start_prefill()
        self.waiting.insert(0, r)

    def admit(self, plan: StepPlan) -> list[Request]:
        admitted, queue = [], self.queue()
        for i, r in enumerate(queue):
            wait = self.why_not(plan, r)
            if wait is not None and wait.reason is WaitReason.SIBLING:
                plan.out.waits[r.id] = wait
                continue  # its sibling's prompt is not computed yet: later requests may go first
            if wait is not None:  # head of line: the rest wait too, rather than let a later request overtake
                self.note_behind(plan, queue[i:], wait)
                break
            leader = self.leader_of(r)
            if self.blocks.is_swapped(r):
                plan.out.swap_in += self.blocks.swap_in(r)
            elif leader is not None and self.can_fork(r, leader):
                p = len(r.spec.prompt_ids) - 1
                self.blocks.fork(r, leader, p)
                r.num_cached = r.num_prefilled = p
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
        leader = self.leader_of(r)
        if leader is not None and self.waits_for_leader(leader):
            return Wait(WaitReason.SIBLING, ahead=leader.id)
        if self.blocks.is_swapped(r):
            need = self.blocks.swap_in_need(r, r.num_cached + 1)
            return None if self.has_room(need) else Wait(WaitReason.SWAPPED, short=self.short_of(need))
        if leader is not None and self.can_fork(r, leader):
            p = len(r.spec.prompt_ids) - 1
            need = self.blocks.fork_need(r.spec, p, p + self.chunk_room(plan, len(r.prefill_ids) - p))
            return None if self.has_room(need) else Wait(WaitReason.KV_BLOCKS, short=self.short_of(need))
        n = self.prefill_room(r, plan)
        if n == 0 or not self.leaves_headroom(r, n):
            need = self.blocks.extra_blocks(r, r.num_cached + self.prefill_want(r, plan))
            return Wait(WaitReason.KV_BLOCKS, short=self.short_of(need))
        return None

    def short_of(self, need: int) -> int:
        """Free blocks lacking to take `need` blocks by has_room's rule (one left free per running request)."""
        headroom = 0 if self.blocks.reserve else sum(1 for s in self.slots if s is not None)
        return need + headroom - self.blocks.num_free

    def note_behind(self, plan: StepPlan, line: list[Request], head: Wait) -> None:
        """`line[0]` waits for `head`; a slot or a token budget is lacking for the rest as well, but KV blocks are
        its own need: a request behind it that would fit waits behind it."""
        plan.out.waits[line[0].id] = head
        for r in line[1:]:
            kv = head.reason in (WaitReason.KV_BLOCKS, WaitReason.SWAPPED)
            wait = self.why_not(plan, r) if kv else head
            plan.out.waits[r.id] = wait or Wait(WaitReason.BEHIND, ahead=line[0].id)

    # -- siblings (parallel sampling: RequestSpec.group) ----------------------------------------------
    def leader_of(self, r: Request) -> Request | None:
        """The sibling whose prompt blocks `r` forks: the first of its group still on the books (None: `r` leads,
        or has no siblings)."""
        if r.spec.group is None:
            return None
        leader = next(q for q in self.requests if q.spec.group == r.spec.group)
        return None if leader is r else leader

    def waits_for_leader(self, leader: Request) -> bool:
        """Whether a sibling waits until its leader's prompt is computed (it will fork those blocks)."""
        return leader.status in (RequestStatus.PENDING, RequestStatus.WAITING) or \
            (leader.status is RequestStatus.RUNNING and leader.is_prefilling)

    def can_fork(self, r: Request, leader: Request) -> bool:
        return r.num_cached == 0 and len(r.spec.prompt_ids) > 1 and leader.status is RequestStatus.RUNNING \
            and leader.id in self.blocks.tables and leader.num_cached >= len(r.spec.prompt_ids) - 1

    def chunk_room(self, plan: StepPlan, n: int) -> int:
        """`n` prompt tokens within the chunk size and the step's token budget (chunked lanes)."""
        if self.chunked and self.config.chunk_size is not None:
            n = min(n, self.config.chunk_size)
        if self.chunked and plan.token_budget is not None:
            n = min(n, plan.token_budget)
        return n

    def leaves_headroom(self, r: Request, n: int) -> bool:
        """Whether admitting `r` with an `n`-token chunk still leaves one free block per running request, so
        that their next decode does not at once preempt the newcomer (which would thrash: admit, evict, repeat)."""
        return self.has_room(self.blocks.extra_blocks(r, r.num_cached + n))

    def has_room(self, need: int) -> bool:
        """Whether taking `need` blocks leaves one free block per running request (see leaves_headroom; a reserve
        lane's requests hold their whole maximum already)."""
        free = self.blocks.num_free
        headroom = 0 if self.blocks.reserve else sum(1 for s in self.slots if s is not None)
        return free is None or free - need >= headroom

    def release(self) -> list[Request]:
        returned = [r for r in self.slots if r is not None and r.is_finished]
        for r in returned:
            self.give_back(r)
        return returned


# The batching policies, in the order the page stacks their lanes.
POLICIES: dict[str, type[Scheduler]] = {cls.lane: cls for cls in (StaticScheduler, DynamicScheduler, ContinuousScheduler)}
# What each policy is, as data: what the workload, the catalog and the page read (never the classes themselves).
TRAITS: dict[str, Traits] = {name: cls.traits for name, cls in POLICIES.items()}


def policy_traits() -> dict[str, dict]:
    """{policy: its traits} in page order: what the run announcement and the page's catalog carry."""
    return {name: traits.to_dict() for name, traits in TRAITS.items()}


def options_only_for() -> dict[str, tuple[str, ...]]:
    """{option: the policies that take it}, for the options some policies do not take (a lane of another policy
    that sets one is refused)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, traits in TRAITS.items():
        for option in traits.options:
            out[option] = out.get(option, ()) + (name,)
    return out
