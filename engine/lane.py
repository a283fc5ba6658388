"""A lane: one batching policy driving one runner, recording one `StepRecord` per step.

    schedule -> run -> update_from_output -> release -> record

That is the whole loop; the scheduler decides, the runner computes, the lane writes it down.
"""
import time

from .runner import ForwardResult
from .scheduler import Scheduler, SchedulerOutput
from .step import SlotRecord, SlotState, StepRecord


class Lane:
    def __init__(self, scheduler: Scheduler, runner, kv_capacity: int):
        self.scheduler = scheduler
        self.runner = runner
        self.kv_capacity = kv_capacity
        self.records: list[StepRecord] = []

    @property
    def name(self) -> str:
        return self.scheduler.lane

    @property
    def done(self) -> bool:
        return self.scheduler.is_finished()

    def step(self) -> StepRecord | None:
        """Run one step; None once every request has been returned."""
        if self.done:
            return None
        t0 = time.perf_counter()
        out = self.scheduler.schedule()
        result = self.runner.run(out.rows) if out.rows else ForwardResult({}, 0.0, "none")
        self.scheduler.update_from_output(out, result.tokens)
        texts = {row.slot: self.runner.text_delta(row.request) for row in out.rows if row.wants_token}
        kv = (self.scheduler.kv_used(), self.scheduler.blocks.num_used)  # before finished requests leave
        returned = self.scheduler.release()
        # a step that only waits for arrivals computes nothing and costs nothing
        ms = (time.perf_counter() - t0) * 1000 if out.rows else 0.0
        record = self.record(out, result, texts, returned, kv, ms)
        self.records.append(record)
        return record

    def record(self, out: SchedulerOutput, result: ForwardResult, texts: dict, returned: list,
               kv: tuple[int, int], ms: float) -> StepRecord:
        s = self.scheduler
        cells = [SlotRecord(SlotState.IDLE)] * len(s.slots)
        for slot, r in out.preempted.items():
            cells[slot] = SlotRecord(SlotState.PREEMPTED, r.id)
        for r in out.stalled:
            cells[r.slot] = SlotRecord(SlotState.PREFILL, r.id, prefill=(r.num_prefilled, len(r.prefill_ids)))
        for row in out.rows:
            r = row.request
            token = result.tokens.get(row.slot) if row.wants_token else None
            cells[row.slot] = SlotRecord(
                state=row.state, request=r.id,
                token_id=token,
                token=texts.get(row.slot),
                stop=r.stop if row.wants_token and r.finish_step == out.step else None,
                prefill=(r.num_prefilled, len(r.prefill_ids)) if row.state is SlotState.PREFILL else None)
        return StepRecord(
            lane=self.name, step=out.step, slots=tuple(cells),
            waiting=tuple(r.id for r in s.waiting),
            admitted=tuple(r.id for r in out.admitted),
            finished=tuple(r.id for r in s.requests if r.finish_step == out.step),
            returned=tuple(r.id for r in returned),
            preempted=tuple(r.id for r in out.preempted.values()),
            kv_used=kv[0], kv_capacity=self.kv_capacity,
            kv_blocks_used=kv[1], kv_blocks_total=s.blocks.num_blocks or 0,
            ms=ms, forward_ms=result.forward_ms, forward=result.forward,
            extra={"simulated": True} if self.runner.simulated else
            {"filler_slots": list(result.filler_slots)} if result.filler_slots else {})
