"""The live lane: one continuous lane that never ends, fed by clients' requests as they come (the OpenAI API).

Its clock is the wall clock, in ms since the lane opened: a step starts when the worker runs it, and time with
nothing to compute is drawn as waiting, as on any lane with arrivals in ms. Requests and cancellations arrive
from other threads through a thread-safe inbox and are applied at the start of the next step, so the lane's
state only ever changes on the thread that steps it. After each step, the listener of every request that took part
hears the step record and the request's cell in it (text, logprobs, stop) by `notify`, on the caller's thread: the
record is all that leaves the lane, never its `Request`s. This module knows the scheduler, the runner and the
record; nothing of HTTP, sockets or the OpenAI format.
"""
import queue
import time
from collections import deque
from dataclasses import replace
from typing import Callable

from engine.config import live_config
from engine.lane import Lane
from engine.sched.policies import ContinuousScheduler
from engine.request import Request
from engine.spec import RequestSpec
from engine.worker.runner import ModelRunner
from engine.worker.sim import SimRunner
from engine.step import SlotRecord, StepRecord

# called after each step a request took part in, with the step and its cell there (None: it had none); with
# (None, None) once when it is dropped (cancelled, or its step failed)
Listener = Callable[[StepRecord | None, SlotRecord | None], None]

class LiveLane:
    def __init__(self, engine, slots: int = 8, row_len: int | None = None, keep_steps: int = 2000,
                 options: dict | None = None):
        lm, limits = engine.lm, engine.limits
        self.engine = engine
        self.row_len = row_len or min(limits.max_prompt_tokens + limits.max_new_tokens,
                                      lm.max_context if lm is not None else 1 << 30)
        self.lane = self.make_lane(live_config(slots, self.row_len, options))
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()   # ("add", spec, listener) | ("cancel", request id)
        self.listeners: dict[str, Listener] = {}
        self.calls: list[tuple[Listener, StepRecord | None, SlotRecord | None]] = []  # what `notify` will tell
        self.requests: dict[str, Request] = {}                # not yet returned, by id
        self.recent: deque[StepRecord] = deque(maxlen=keep_steps)
        self.t0 = time.monotonic()
        self.queued = 0                                       # requests in the inbox or waiting for a slot
        self.failure: str | None = None                       # why the last aborted step failed (for its listeners)

    def make_lane(self, config, scheduler_class=ContinuousScheduler, name: str = "live") -> Lane:
        """The lane this live lane steps: `scheduler_class` on `config`, over a runner of its block manager's pool."""
        lm, slots = self.engine.lm, config.slots
        scheduler = scheduler_class(config, [], eos_ids=frozenset() if lm is None else lm.eos_ids,
                                    pad_id=0 if lm is None else lm.pad_id, timed=True)
        blocks = scheduler.blocks
        runner = SimRunner(slots, blocks.num_blocks, blocks.block_size, fused=config.fused) if lm is None else \
            ModelRunner(lm, slots, blocks.num_blocks, blocks.block_size, fused=config.fused)
        return Lane(name, scheduler, runner, kv_capacity=slots * self.row_len)

    @property
    def scheduler(self) -> ContinuousScheduler:
        return self.lane.scheduler

    def options(self) -> dict:
        """How the lane batches, for the Live view: slots, token budget, chunk, fused, prefix cache, KV blocks."""
        c = self.scheduler.config
        return {"slots": c.slots, "max_batch_tokens": c.max_batch_tokens, "chunk_size": c.chunk_size,
                "fused": c.fused, "prefix_cache": c.prefix_cache, "kv_blocks": c.kv_blocks,
                "kv_block_size": c.kv_block_size, "kv_bytes": self.lane.runner.kv_bytes}

    def now_ms(self) -> float:
        return round((time.monotonic() - self.t0) * 1000, 3)

    # -- from any thread ----------------------------------------------------------------------------
    def submit(self, spec: RequestSpec, listener: Listener) -> float:
        """Queue a prepared request (its prompt_ids set); it joins at the next step. Returns its arrival (lane ms)."""
        arrival = self.now_ms()
        self.queued += 1
        self.inbox.put(("add", replace(spec, arrival_ms=arrival), listener))
        return arrival

    def cancel(self, request_id: str) -> None:
        """Its client went away: the request leaves at the start of the next step, freeing its slot."""
        self.inbox.put(("cancel", request_id))

    def has_work(self) -> bool:
        return not self.inbox.empty() or self.scheduler.has_work()

    # -- on the stepping thread ---------------------------------------------------------------------
    def step(self) -> StepRecord | None:
        """Apply the inbox, then run one step if there is anything to compute (None if not)."""
        self._drain()
        if not self.scheduler.has_work():
            return None
        self.lane.clock = max(self.lane.clock, self.now_ms())  # the wall clock: idle time is waiting
        record = self.lane.step()
        self.tell(record)
        for request_id in record.returned:
            self.requests.pop(request_id, None)
            self.listeners.pop(request_id, None)
        self.scheduler.forget_returned()
        self.queued = len(self.scheduler.waiting) + self.inbox.qsize()
        self.recent.append(record)
        return record

    def tell(self, record: StepRecord) -> None:
        """Queue for `notify` what `record` did to each request of this lane that took part in it."""
        cells = {c.request: c for c in record.slots if c.request}
        for request_id in cells.keys() | set(record.finished) | set(record.returned):
            if request_id in self.requests and request_id in self.listeners:
                self.calls.append((self.listeners[request_id], record, cells.get(request_id)))

    def _drain(self) -> None:
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return
            if item[0] == "add":
                _, spec, listener = item
                request = self.scheduler.add(spec)
                self.requests[spec.id] = request
                self.listeners[spec.id] = listener
            elif item[1] in self.requests:
                request = self.requests.pop(item[1])
                self.scheduler.cancel(request)
                self.calls.append((self.listeners.pop(item[1]), None, None))
                self.scheduler.forget_returned()

    def notify(self) -> None:
        """Tell the listeners what the last `step` did to their requests. Called by whoever stepped, on its own
        thread: the compute may run on a thread pool, the listeners' queues belong to the server's threads."""
        calls, self.calls = self.calls, []
        for listener, record, cell in calls:
            listener(record, cell)

    def abort(self) -> list[Request]:
        """After a step failed: drop every request (their listeners hear record None); the lane starts clean."""
        self._drain()
        dropped = list(self.requests.values())
        for request in dropped:
            self.scheduler.cancel(request)
            self.calls.append((self.listeners.pop(request.id), None, None))
        self.requests.clear()
        self.scheduler.forget_returned()
        self.queued = 0
        return dropped
