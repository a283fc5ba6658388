"""The scheduler decides, step by step, which request runs in which slot and what each row computes.

`Scheduler` holds what every batching policy shares: arrivals, the slot table, the KV block
accounting, building the rows of a step, and folding the sampled tokens back into the requests.
A policy (`policies.py`) only says who is admitted, who is evicted and when a slot is given back.
The scheduler never sees a tensor: the runner computes, `lane.Lane` ties the two together.
`schedule()` builds each step on a `batch.StepPlan` it passes to every helper (and to the policy's `admit`), so
the scheduler keeps no per-step state; `update_from_output` returns what it kept (`batch.StepUpdate`).
"""
from dataclasses import dataclass

from engine.sched.batch import Row, SchedulerOutput, StepPlan, StepUpdate
from engine.kv.block_manager import blocks_for, lane_blocks
from engine.config import EngineConfig
from engine.kv.prefix_cache import PrefixCache
from engine.request import Request, RequestStatus
from engine.spec import RequestSpec
from engine.sched.speculative import proposals_for
from engine.sched.stopping import Detokenize, text_of, token_stop
from engine.step import SlotState, StopReason


@dataclass(frozen=True)
class Traits:
    """What a batching policy is, declared once on its scheduler class: the page, the narration, the editor and the
    workload check read these, never the policy's name."""
    label: str                    # "Continuous batching"
    admits: str                   # "group": a whole group at once, held until its longest member is done;
                                  # "slot": any free slot, every step
    waits_for: str | None         # a group starts when "full" (all its members arrived) or "full_or_deadline"
                                  # (full, or the oldest waiter waited max_wait); None: nothing to wait for
    preempts: bool                # evicts a running request when the KV budget binds (it is recomputed later)
    options: tuple[str, ...]      # the EngineConfig options only this policy takes
    description: str = ""         # one sentence for the page

    @property
    def chunks(self) -> bool:
        """Whether prompts may be prefilled over several steps (chunk_size, max_batch_tokens)."""
        return "chunk_size" in self.options

    def to_dict(self) -> dict:
        return {"label": self.label, "admits": self.admits, "waits_for": self.waits_for, "preempts": self.preempts,
                "chunks": self.chunks, "options": list(self.options), "description": self.description}


class Scheduler:
    lane = ""
    traits: Traits

    @property
    def chunking(self) -> bool:
        """Whether chunk_size and max_batch_tokens apply (the policy's traits say)."""
        return self.traits.chunks

    @property
    def prefix_caching(self) -> bool:
        """Whether the prefix_cache option applies."""
        return "prefix_cache" in self.traits.options

    def __init__(self, config: EngineConfig, specs: list[RequestSpec], eos_ids: frozenset[int] = frozenset(),
                 pad_id: int = 0, timed: bool = False):
        self.config = config
        self.eos_ids = eos_ids
        self.pad_id = pad_id    # fed to padding rows, as generate() feeds its pad token
        self.timed = timed      # arrivals in lane-clock ms (`arrival_ms`), else in steps (`arrival`)
        self.requests = [Request(spec, order=i) for i, spec in enumerate(specs)]
        self.pending = sorted(self.requests, key=lambda r: (self.arrival_of(r), r.order))
        self.waiting: list[Request] = []
        self.slots: list[Request | None] = [None] * config.slots
        self.prefix = PrefixCache(config.kv_block_size) if config.prefix_cache and self.prefix_caching else None
        self.blocks = lane_blocks(config, specs, self.prefix)
        self.step = 0
        self.now: float = 0     # when the current step starts: lane-clock ms if timed, else its 0-based index

    # -- the policy's part ---------------------------------------------------------------------------
    def admit(self, plan: StepPlan) -> list[Request]:
        """Place waiting requests into free slots of `plan`'s step with `place` (which starts their prefill); return
        them."""
        raise NotImplementedError

    def make_room(self, plan: StepPlan) -> dict[int, Request]:
        """Evict running requests if the step's decodes cannot get their KV blocks (a swap goes on `plan`). Default:
        never needed."""
        return {}

    def release(self) -> list[Request]:
        """After a step: give back slots (and return responses) as the policy says; return the returned."""
        raise NotImplementedError

    def can_admit(self) -> bool:
        """Whether `admit` would place a waiting request now (there is one). Default: whoever waits is admitted."""
        return True

    def next_event(self) -> float | None:
        """When a lane with nothing to compute now may have something: the next arrival (policies add deadlines)."""
        return self.arrival_of(self.pending[0]) if self.pending else None

    # -- the shared loop ----------------------------------------------------------------------------
    def is_finished(self) -> bool:
        return all(r.status is RequestStatus.RETURNED for r in self.requests)

    def arrival_of(self, request: Request) -> float:
        return request.spec.arrival_ms if self.timed else request.spec.arrival

    def arrive(self, now: float) -> None:
        """Queue every request that has arrived by `now` (lane-clock ms if timed, else a 0-based step)."""
        self.now = now
        while self.pending and self.arrival_of(self.pending[0]) <= now:
            request = self.pending.pop(0)
            request.status = RequestStatus.WAITING
            request.start_prefill()
            self.waiting.append(request)

    def has_work(self) -> bool:
        """Whether a step now would compute something: a request holds a slot, or a waiting one would be admitted."""
        return any(r is not None for r in self.slots) or (bool(self.waiting) and self.can_admit())

    def schedule(self, now: float | None = None) -> SchedulerOutput:
        """The rows of the next step, which starts at `now` on the lane clock (timed arrivals only)."""
        self.step += 1
        # 1) arrivals: by the lane clock, or from 0-based step `arrival`, i.e. 1-based step arrival + 1
        self.arrive(now if self.timed else self.step - 1)
        # 2) evictions, if the running decodes cannot all get their KV blocks (continuous lane only)
        plan = StepPlan(SchedulerOutput(self.step, []), token_budget=self.config.max_batch_tokens if self.chunking else None)
        plan.out.preempted = self.make_room(plan)
        # 3) rows of the running requests: decodes and padding first (one token each), then prefills
        running = [r for r in self.slots if r is not None]
        decoding = [r for r in running if not r.is_finished and not r.is_prefilling]
        for r in running:
            if r.is_finished:
                self.add_row(plan, r, SlotState.PADDING, [self.pad_id], wants_token=False)
            elif not r.is_prefilling:
                decoding.pop(0)  # r: the others still to come follow it
                guesses = self.proposals(plan, r, decoding)
                self.add_row(plan, r, SlotState.DECODE, [r.output_ids[-1]] + guesses, wants_token=True, proposed=len(guesses))
        for r in sorted((r for r in running if r.is_prefilling and not r.is_finished),
                        key=lambda r: (r.admitted_step, r.order)):
            self.add_prefill(plan, r)
        # 4) admissions: the policy places waiting requests, each placed request prefills at once
        plan.out.admitted = self.admit(plan)
        plan.out.rows.sort(key=lambda row: row.slot)
        return plan.out

    def add_row(self, plan: StepPlan, request: Request, state: SlotState, token_ids: list[int], wants_token: bool,
                proposed: int = 0) -> None:
        start = request.num_cached
        plan.out.copies += self.blocks.grow(request, start + len(token_ids))
        table = self.blocks.tables[request.id]
        if self.prefix and state is SlotState.PREFILL:  # its new full prompt blocks join the cache, by their pool ids
            self.prefix.add_computed(request, request.num_prefilled + len(token_ids), table)
        blocks = tuple(table[:blocks_for(start + len(token_ids), self.blocks.block_size)])
        plan.add(Row(request.slot, request, state, token_ids, start, wants_token, proposed, blocks))

    def proposals(self, plan: StepPlan, request: Request, others: list[Request]) -> list[int]:
        """Tokens to verify after `request`'s last one (speculative lanes; `others`: decoders still to come)."""
        if self.config.speculative is None:
            return []
        return proposals_for(request, self.config.speculative, self.blocks, others, plan.token_budget)

    def add_prefill(self, plan: StepPlan, request: Request) -> None:
        if self.prefix and request.num_cached == 0 and request.id not in self.prefix.held \
                and request.spec.prompt_logprobs is None:  # prompt logprobs need every prompt position computed
            self.reuse_prefix(request)
        n = self.prefill_room(request, plan)
        if n == 0:
            plan.out.stalled.append(request)
            return
        chunk = request.prefill_ids[request.num_prefilled:request.num_prefilled + n]
        done = request.num_prefilled + n == len(request.prefill_ids)
        self.add_row(plan, request, SlotState.PREFILL, chunk, wants_token=done)

    def reuse_prefix(self, request: Request) -> None:
        """A request (re)starting its prefill takes its longest cached prefix: those tokens count as prefilled,
        and their pool blocks head its block table (shared by reference, never copied)."""
        blocks = self.prefix.match(request)
        self.blocks.hold_cached(request, [b.id for b in blocks])
        size = self.blocks.block_size
        request.num_prefilled = request.num_cached = len(blocks) * size
        if blocks:
            request.num_from_cache, request.cache_hit_step = len(blocks) * size, self.step

    def prefill_room(self, request: Request, plan: StepPlan) -> int:
        """Prompt tokens `request` may prefill in `plan`'s step (0: none), within the chunk size, token and KV
        budgets."""
        n = self.prefill_want(request, plan)
        b = self.blocks
        if n > 0 and not b.can_grow(request, request.num_cached + n):
            # a chunked prefill takes what fits (paged); a whole-prompt prefill, or a reservation, waits for all of it
            room = (b.held.get(request.id, 0) + b.num_free - b.must_copy(request)) * b.block_size - request.num_cached
            n = room if self.chunked and not b.reserve else 0
        return max(n, 0)

    def prefill_want(self, request: Request, plan: StepPlan) -> int:
        """Prompt tokens `request` would prefill in `plan`'s step were KV blocks no limit (chunk size, token budget)."""
        n = len(request.prefill_ids) - request.num_prefilled
        if self.chunked:
            if self.config.chunk_size is not None:
                n = min(n, self.config.chunk_size)
            if plan.token_budget is not None:
                n = min(n, plan.token_budget)
        return n

    @property
    def chunked(self) -> bool:
        """Whether prompts may be prefilled over several steps (chunk size or token budget set)."""
        return self.chunking and (self.config.chunk_size is not None or self.config.max_batch_tokens is not None)

    def update_from_output(self, out: SchedulerOutput, tokens: dict[int, int | list[int] | None],
                           detokenize: Detokenize | None = None) -> StepUpdate:
        """Fold the runner's tokens (slot -> token id, or a verified row's list of ids) into the requests, leaving
        `tokens` as it is; decide who stops, and why, in one place: max_new_tokens, EOS, then a stop string in the
        text `detokenize` (the runner's `text_delta`; None: no text, no stop strings) adds. Return what each row wrote
        (a list stops at EOS or max_new_tokens) and the text it adds."""
        kept, texts = {}, {}
        for row in out.rows:
            r = row.request
            if not row.proposed:
                r.num_cached += len(row.token_ids)
            if row.state is SlotState.PREFILL:
                r.num_prefilled += len(row.token_ids)
            if not row.wants_token:
                continue
            written = tokens[row.slot] if row.proposed else [tokens[row.slot]]
            for n, token in enumerate(written, 1):
                r.output_ids.append(token)
                r.stop = token_stop(r, token, self.eos_ids)
                if r.stop is not None:
                    break
            kept[row.slot] = written[:n] if row.proposed else tokens[row.slot]
            if row.proposed:  # the K/V of the last token and of the proposals kept count: one per token written
                r.num_cached += n
            if r.first_token_step is None:
                r.first_token_step = self.step
            texts[row.slot] = text_of(r, kept[row.slot], detokenize)
            if r.stop is not None:
                r.status = RequestStatus.FINISHED
                r.finish_step = self.step
        if self.prefix:
            self.prefix.commit()
        return StepUpdate(kept, texts)

    # -- requests that come while the lane runs (a fleet's or P/D lane's engines; the live lane) -------
    def send(self, request: Request) -> None:
        """Queue a request a router or a hand-off sent here: it arrives by its own arrival, as a workload's does."""
        self.pending = sorted(self.pending + [request], key=lambda r: (self.arrival_of(r), r.order))

    def add(self, spec: RequestSpec) -> Request:
        """Queue a request that arrived now, as a client's request does on the live lane."""
        request = Request(spec, order=len(self.requests) and self.requests[-1].order + 1)
        request.status = RequestStatus.WAITING
        request.start_prefill()
        self.requests.append(request)
        self.waiting.append(request)
        return request

    def finish(self, request: Request, stop: StopReason) -> None:
        """End `request` now, for a reason no step shows (its client went away); `release` gives its slot back."""
        if not request.is_finished:
            request.stop, request.status, request.finish_step = stop, RequestStatus.FINISHED, self.step

    def cancel(self, request: Request) -> None:
        """Between steps: drop `request` at once (its client went away), freeing its slot and KV blocks."""
        if request.status is RequestStatus.RETURNED:
            return
        if request in self.waiting:
            self.waiting.remove(request)
        self.blocks.forget(request)  # a swapped-out request's host blocks
        self.finish(request, StopReason.CANCELLED)
        if request.slot is not None and self.slots[request.slot] is request:
            self.give_back(request)
        else:
            request.status, request.return_step = RequestStatus.RETURNED, self.step

    def forget_returned(self) -> None:
        """Drop returned requests from the books (a live lane's list would otherwise grow without end)."""
        self.requests = [r for r in self.requests if r.status is not RequestStatus.RETURNED]

    # -- helpers for policies -----------------------------------------------------------------------
    def place(self, plan: StepPlan, request: Request, slot: int) -> None:
        assert self.slots[slot] is None
        self.waiting.remove(request)
        self.slots[slot] = request
        request.slot, request.status, request.admitted_step = slot, RequestStatus.RUNNING, self.step
        if request.is_prefilling:
            self.add_prefill(plan, request)
        else:  # a swapped-out request resumes its decode where it stopped
            self.add_row(plan, request, SlotState.DECODE, [request.output_ids[-1]], wants_token=True)

    def give_back(self, request: Request) -> None:
        """Free `request`'s slot and KV blocks and return its response to the client."""
        self.slots[request.slot] = None
        self.blocks.free(request)
        request.status, request.return_step = RequestStatus.RETURNED, self.step

    def free_slots(self) -> list[int]:
        return [s for s, r in enumerate(self.slots) if r is None]

    def kv_used(self) -> int:
        shared = self.blocks.shared_tokens()  # a shared block once
        return sum(r.num_cached for r in self.slots if r is not None) - shared
