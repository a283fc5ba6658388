"""A lane: one batching policy driving one runner, recording one `StepRecord` per step on its own clock.

    (wait for work) -> schedule -> run -> update_from_output -> release -> record

`Lane.step` is that loop: the scheduler decides, the runner computes, the lane writes it down.
The lane clock is the sum of the lane's step times plus the time it waited: with arrivals in ms, a lane
with nothing to compute jumps its clock to the next arrival (the gap is drawn as waiting); with arrivals
in steps, a step that computes nothing lasts the lane's median measured step, so that waiting is never
free on the milliseconds clock and a lane cannot look faster because it waited.
"""
import bisect
import statistics
import time
from dataclasses import dataclass
from typing import Protocol

from engine.sched.batch import ForwardResult, SchedulerOutput
from engine.report.placement import placement
from engine.request import Request
from engine.sched.scheduler import Scheduler
from engine.worker import Runner
from engine.sched.speculative import cell_facts
from engine.step import Forward, SlotRecord, SlotState, StepRecord


@dataclass(frozen=True)
class StepFacts:
    """What one step did, gathered by `Lane.step` for `Lane.record` (which turns it into the step record)."""
    out: SchedulerOutput                     # what the scheduler decided
    result: ForwardResult                    # what the runner computed
    written: dict[int, int | list[int]]      # slot -> the token(s) its row kept (StepUpdate.written)
    texts: dict[int, str | None]             # slot -> the text its tokens add to the response (None: no tokenizer)
    returned: list[Request]                  # responses given back after the step
    kv_used: int                             # KV tokens held once the step computed, before finished requests leave
    kv_blocks_used: int                      # ...in blocks
    kv_blocks_cached: int                    # prefix cache blocks no running request holds
    start_ms: float                          # the lane clock when the step started
    ms: float                                # how long it lasted


class SteppedLane(Protocol):
    """What a run steps and reads: our `Lane`, and the vLLM lane (engine/peers/vllm_lane.py), whose scheduler and
    model are vLLM's. The run loop, the run books and the sweeps know lanes through these names alone."""
    name: str
    records: list[StepRecord]
    clock: float

    @property
    def policy(self) -> str: ...
    @property
    def done(self) -> bool: ...
    @property
    def requests(self) -> list: ...     # every request of the lane, each with `id` and `output_ids`
    def step(self) -> StepRecord | None: ...


class Lane:
    def __init__(self, name: str, scheduler: Scheduler, runner: Runner, kv_capacity: int):
        self.name = name
        self.scheduler = scheduler
        self.runner = runner
        self.kv_capacity = kv_capacity
        self.records: list[StepRecord] = []
        self.clock = 0.0                   # lane-clock ms at the end of the last step (or wait)
        self.measured: list[float] = []    # ms of the steps that computed something, sorted
        self.last_cached: tuple[int, ...] = ()  # the cached blocks no request held at the last record
        self.open = False                  # a fleet's replica (engine/fleet.py): not done while more may be sent it

    @property
    def policy(self) -> str:
        return self.scheduler.lane

    @property
    def done(self) -> bool:
        return not self.open and self.scheduler.is_finished()

    @property
    def requests(self) -> list[Request]:
        return self.scheduler.requests

    def step(self) -> StepRecord | None:
        """Run one step; None once every request has been returned."""
        if self.done:
            return None
        if self.scheduler.timed:
            self.wait_for_work()
        start = self.clock
        t0 = time.perf_counter()
        out = self.scheduler.schedule(start)
        ops = {k: getattr(out, k) for k in ("swap_out", "swap_in", "copies") if getattr(out, k)}
        result = self.runner.run(out.rows, **ops) if out.rows or ops else ForwardResult({}, 0.0, Forward.NONE)
        # the text comes from the runner's tokenizer; who stops (length, EOS, stop strings) the scheduler decides
        update = self.scheduler.update_from_output(out, result.tokens, self.runner.text_delta)
        kv_used, kv_blocks_used = self.scheduler.kv_used(), self.scheduler.blocks.num_used  # before any leave
        cached_blocks = self.scheduler.blocks.num_cached_free
        returned = self.scheduler.release()
        if out.rows:  # the simulator's steps last what its cost model says; the model's what they measured
            ms = round(result.forward_ms + result.copy_ms if self.runner.simulated
                       else (time.perf_counter() - t0) * 1000, 3)
            bisect.insort(self.measured, ms)
        else:
            ms = self.idle_step_ms()
        self.clock = round(start + ms, 3)
        record = self.record(StepFacts(out, result, update.written, update.texts, returned, kv_used, kv_blocks_used,
                                       cached_blocks, start, ms))
        self.records.append(record)
        if self.done and hasattr(self.runner, "close"):  # a split lane's processes end with the lane
            self.runner.close()
        return record

    def wait_for_work(self) -> None:
        """Arrivals in ms: while the lane has nothing to compute, jump its clock to the next arrival (or deadline)."""
        s = self.scheduler
        s.arrive(self.clock)
        while not s.has_work():
            t = s.next_event()
            if t is None or t <= self.clock:
                return  # nothing will change by waiting: the step runs (and is recorded) as it is
            self.clock = t
            s.arrive(t)

    def next_start(self) -> float:
        """When the lane's next step starts: now if it has work, at its next arrival if it waits for one, else never."""
        s = self.scheduler
        s.arrive(self.clock)
        if s.has_work():
            return self.clock
        return max(self.clock, s.arrival_of(s.pending[0])) if s.pending else float("inf")

    def idle_step_ms(self) -> float:
        """What a step that computes nothing lasts: the lane's median measured step so far, or before it has
        measured one the runner's one-row decode step."""
        return round(statistics.median(self.measured) if self.measured else self.runner.reference_ms(), 3)

    def record(self, facts: StepFacts) -> StepRecord:
        s, out, result = self.scheduler, facts.out, facts.result
        hit = {r.id: r.num_from_cache for r in s.requests if r.cache_hit_step == out.step}  # prefix cache hits
        cells = [SlotRecord(SlotState.IDLE)] * len(s.slots)
        for slot, r in out.preempted.items():
            cells[slot] = SlotRecord(SlotState.SWAPPED if r in out.swapped else SlotState.PREEMPTED, r.id)
        for r in out.stalled:
            cells[r.slot] = SlotRecord(SlotState.PREFILL, r.id, prefill=(r.num_prefilled, len(r.prefill_ids)),
                                       cached=hit.get(r.id, 0))
        for row in out.rows:
            r = row.request
            cell = cell_facts(row.token_ids[1:], facts.written.get(row.slot) if row.wants_token else None)
            token = cell["token_id"]
            cells[row.slot] = SlotRecord(
                state=row.state, request=r.id, **cell,
                token=facts.texts.get(row.slot),
                stop=r.stop if row.wants_token and r.finish_step == out.step else None,
                prefill=(r.num_prefilled, len(r.prefill_ids)) if row.state is SlotState.PREFILL else None,
                # only a cell that is one special token; text ending in EOS (a kept proposal run) is text
                special=token is not None and not cell.get("tokens") and self.runner.is_special(token),
                cached=hit.get(r.id, 0) if row.state is SlotState.PREFILL else 0,
                **self.logprob_facts(r, cell) if row.wants_token else {})
        return StepRecord(
            lane=self.name, step=out.step, slots=tuple(cells),
            waiting=tuple(r.id for r in s.waiting),
            waits={r.id: out.waits[r.id].to_dict() for r in s.waiting if r.id in out.waits},
            admitted=tuple(r.id for r in out.admitted),
            finished=tuple(r.id for r in s.requests if r.finish_step == out.step),
            returned=tuple(r.id for r in facts.returned),
            preempted=tuple(r.id for r in out.preempted.values() if r not in out.swapped),  # recomputed later
            kv_used=facts.kv_used, kv_capacity=self.kv_capacity,
            kv_blocks_used=facts.kv_blocks_used, kv_blocks_total=s.blocks.num_blocks or 0,
            kv_blocks_cached=facts.kv_blocks_cached,
            start_ms=facts.start_ms, ms=facts.ms, forward_ms=result.forward_ms, forward=result.forward,
            simulated=self.runner.simulated, copy_ms=result.copy_ms, **(result.tp or {}), **(result.pp or {}),
            placement=None if self.records else self.placement(),
            **self.memory_map())

    @staticmethod
    def logprob_facts(r: Request, cell: dict) -> dict:
        """The logprobs a cell carries where its request asked: its tokens', and on its first token's cell the
        prompt's (a preempted request's recomputed entries replace their own: its latest are the ones sent)."""
        facts, n = {}, len(cell["tokens"]) if cell.get("tokens") else cell["token_id"] is not None
        if r.spec.logprobs is not None:
            facts["logprobs"] = tuple(r.token_logprobs[r.num_tokens - n:r.num_tokens])
        if r.spec.prompt_logprobs is not None and r.num_tokens == n and n:
            facts["prompt_logprobs"] = tuple(r.prompt_logprobs)
        return facts

    def memory_map(self) -> dict:
        """The record's kv_* fields: the block tables' changes since the previous record, after this step."""
        blocks = self.scheduler.blocks
        tables, dropped, swapped = blocks.take_changes()
        cached = tuple(blocks.cached_free())
        changed, self.last_cached = cached != self.last_cached, cached
        tokens = {r.id: r.num_cached for r in self.scheduler.requests if r.id in blocks.tables}
        return {"kv_tables": tables, "kv_dropped": dropped, "kv_swapped": swapped, "kv_tokens": tokens,
                "kv_cached": cached if changed else None, "kv_pool": None if self.records else self.kv_pool()}

    def placement(self) -> dict | None:
        """Where a split runner's processes ran (engine/report/placement.py); None for a runner of one process."""
        processes = getattr(self.runner, "processes", None)
        return placement(processes, self.runner.transport, self.runner.device) if processes else None

    def kv_pool(self) -> dict:
        """The lane's KV memory: the bytes its runner's K/V tensors take, its pool of blocks, how it allocates."""
        b, config = self.scheduler.blocks, self.scheduler.config
        return {"kv_bytes": self.runner.kv_bytes, "num_blocks": b.num_blocks, "block_size": b.block_size,
                "host_blocks": b.host_blocks, "kv_allocation": config.kv_allocation, "preemption": config.preemption}
