"""The two halves of a P/D lane's scheduling (engine/disaggregation.py): continuous batching on each side of a hand-off.

`PrefillScheduler` admits and prefills as the continuous policy does; once a request's prefill wrote its first token
it gives the slot back and hands the request off (it counts as returned here), holding its KV blocks until the lane
has copied them to a decode engine and frees them. `DecodeScheduler` takes handed-off requests whose KV blocks were
copied into its pool already (their block table there held from the copy on): one arrives already prefilled, so it
needs a free slot and nothing else, and its first row is a decode row. A request that stopped on its first token
(EOS, max_new_tokens 1) is returned by the prefill engine and never handed off. Neither knows how blocks are copied,
which engine a request goes to, or clocks beyond their own.
"""
from engine.kv.block_manager import BlockManager, blocks_for
from engine.request import Request, RequestStatus
from engine.spec import row_capacity
from engine.sched.batch import StepPlan
from engine.sched.policies import ContinuousScheduler
from engine.waits import Wait, WaitReason


class PrefillScheduler(ContinuousScheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.handoffs: list[Request] = []   # wrote their first token, left their slot; KV blocks held until copied

    def release(self) -> list[Request]:
        returned = super().release()
        for r in [r for r in self.slots if r is not None and r.num_tokens and not r.is_prefilling]:
            self.slots[r.slot] = None        # its blocks stay in `blocks.tables` until `sent`
            r.status, r.return_step = RequestStatus.RETURNED, self.step
            self.handoffs.append(r)
            returned.append(r)
        return returned

    def sent(self, request: Request) -> None:
        """`request`'s KV blocks were copied to a decode engine: free them here."""
        self.handoffs.remove(request)
        self.blocks.free(request)


class DecodeScheduler(ContinuousScheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # nothing is prefilled here: no prefix cache. Queued requests hold their copied blocks as running ones do, so
        # the pool has room for every request of the workload at once (it never refuses; no KV budget, checked)
        self.prefix = None
        specs = [r.spec for r in self.requests]
        size = self.config.kv_block_size
        self.blocks = BlockManager(max(1, len(specs)) * blocks_for(row_capacity(specs) if specs else size, size), size,
                                   budgeted=False)

    def arrival_of(self, request: Request) -> float:
        """A handed-off request arrives here when its KV copy is done."""
        return request.handoff_at

    def arrive(self, now: float) -> None:
        """Queue every handed-off request whose copy is done by `now`; it keeps its prefill (done on the other side)."""
        self.now = now
        while self.pending and self.arrival_of(self.pending[0]) <= now:
            request = self.pending.pop(0)
            assert not request.is_prefilling and request.id in self.blocks.tables, "a hand-off without its KV blocks"
            request.status = RequestStatus.WAITING
            self.waiting.append(request)

    def why_not(self, plan: StepPlan, r: Request) -> Wait | None:
        if not self.open_slots(plan):
            return Wait(WaitReason.NO_SLOT)
        if plan.token_budget is not None and plan.token_budget <= 0:
            return Wait(WaitReason.TOKEN_BUDGET)
        return None
