"""The live lane as a served P/D pair: a prefill worker process computes each prompt and hands its KV blocks over;
this process's decode engine streams the tokens (the live option `"disaggregation": {"prefill": 1, "decode": 1}`).

`LivePDLane` is a `LiveLane` (the same inbox, listeners, `notify` and record) whose lane is a decode engine
(`DecodeScheduler`: decode rows only) and whose prompts go to a `PrefillWorker` (engine/live_prefill.py). The pair
shares one `KVChannel` (engine/kv/transfer.py): this side makes its shared-memory segment (one region per prefill
slot), the worker writes a hand-off's blocks into a region, this side reads them into blocks its own block table
names and frees the region; both copies are timed, their sum is the transfer. A request's first token, written by the
prefill worker, reaches its listener together with its second, when the decode engine's first step for it ends (as a
P/D proxy streams the decode instance's response; docs/disaggregation.md), and at that moment its five TTFT parts
are known: prefill queue + prefill + transfer + decode queue + first decode = arrival to that step's end
(`handoffs`, for /metrics). The worker runs on the same clock (ms since this lane's `t0`, the host's monotonic clock).

A worker that dies or fails a step ends the requests it held with an error (`failure`), never a hang; requests
already handed off go on here, and the next request starts a fresh worker. It knows the lanes and the channel,
nothing of HTTP or the OpenAI format.
"""
import os
import threading

from engine.kv.block_manager import BlockManager, blocks_for
from engine.kv.transfer import KVChannel
from engine.lane import Lane
from engine.live import LiveLane
from engine.live_prefill import PrefillWorker
from engine.request import RequestStatus
from engine.sched.handoff import DecodeScheduler
from engine.spec import RequestSpec
from engine.worker.model import compute_threads
from engine.worker.runner import ModelRunner

TRANSPORT = "shared memory (multiprocessing.shared_memory)"


class LivePDLane(LiveLane):
    def __init__(self, engine, slots: int = 8, row_len: int | None = None, keep_steps: int = 2000,
                 options: dict | None = None):
        assert engine.lm is not None and engine.lm.folder is not None, "a served P/D pair runs the model from a folder"
        super().__init__(engine, slots, row_len, keep_steps, options)
        self.config = self.scheduler.config
        lm = engine.lm
        self.model = (str(lm.folder), str(lm.dtype).removeprefix("torch."), lm.device.type)
        self.region_blocks = blocks_for(self.row_len, self.config.kv_block_size)   # the longest row's blocks
        self.channel = KVChannel(self.lane.runner.block_bytes, slots * self.region_blocks)
        self.worker: PrefillWorker | None = None
        self.worker_lock = threading.Lock()
        self.at_prefill: dict[str, RequestSpec] = {}    # sent to the worker, not yet back
        self.held: list[tuple] = []                     # hand-offs waiting for room in the decode pool
        self.first: dict[str, tuple] = {}               # request -> (prefill record, its cell, moments): not yet told
        self.made: list[dict] = []                      # hand-offs whose first decode step ended (`handoffs`)
        self.exited: str | None = None                  # how the last worker ended, for /healthz
        self.ensure_worker()                            # it loads the model while the server waits for requests

    def make_lane(self, config, scheduler_class=None, name: str = "live") -> Lane:
        """A decode engine: decode rows only; queued hand-offs hold their copied blocks as running ones do, so its
        pool has room for the slots' rows twice over (more waits at the worker: `held`)."""
        lm, size = self.engine.lm, config.kv_block_size
        scheduler = DecodeScheduler(config, [], eos_ids=lm.eos_ids, pad_id=lm.pad_id, timed=True)
        scheduler.blocks = BlockManager(2 * config.slots * blocks_for(self.row_len, size), size, budgeted=False)
        runner = ModelRunner(lm, config.slots, scheduler.blocks.num_blocks, size, fused=config.fused)
        return Lane("live/decode", scheduler, runner, kv_capacity=config.slots * self.row_len)

    # -- the pair's processes -----------------------------------------------------------------------
    def ensure_worker(self) -> PrefillWorker:
        with self.worker_lock:
            if self.worker is None:
                self.worker = PrefillWorker(self.model, self.config, self.row_len, self.channel.name,
                                            self.region_blocks, self.config.slots, self.t0)
            return self.worker

    def processes(self) -> list[dict]:
        """The pair's processes, for /healthz and the placement: the prefill worker's and this (decode) one's."""
        w = self.worker
        prefill = {"role": "prefill", "pid": w.pid if w else None, "threads": (w.threads if w else None) or 1,
                   "alive": bool(w and w.exit_code() is None), "ready": bool(w and w.ready)}
        if w is None and self.exited:
            prefill["exited"] = self.exited
        return [prefill, {"role": "decode", "pid": os.getpid(), "threads": compute_threads(), "alive": True,
                          "ready": True}]

    def options(self) -> dict:
        """The colocated lane's, and the pair's shape (the OpenAI endpoint refuses what the pair cannot serve)."""
        return {**super().options(), "disaggregation": {"prefill": 1, "decode": 1}}

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        self.channel.close()

    # -- from any thread ----------------------------------------------------------------------------
    def submit(self, spec: RequestSpec, listener) -> float:
        if spec.grammar is not None:
            raise ValueError("structured outputs are not served by this server's P/D pair (the grammar's state is not "
                             "carried from the prefill worker to the decode engine)")
        self.ensure_worker()
        return super().submit(spec, listener)

    def has_work(self) -> bool:
        return bool(self.at_prefill or self.held) or super().has_work()

    # -- on the stepping thread ---------------------------------------------------------------------
    def step(self):
        """Apply the inbox, take the worker's hand-offs, then run one decode step if there is one to run."""
        self._drain()
        self.take(0.0 if self.scheduler.has_work() else 0.05)
        if not self.scheduler.has_work():
            return None
        return super().step()

    def _drain(self) -> None:
        """The inbox: a new request goes to the prefill worker; a cancel reaches wherever the request is."""
        while not self.inbox.empty():
            item = self.inbox.get_nowait()
            if item[0] == "add":
                _, spec, listener = item
                if self.worker is not None and self.worker.exit_code() is not None:
                    self.worker_gone()          # it died while idle: the ones it held end, this one goes to a new one
                self.listeners[spec.id] = listener
                self.at_prefill[spec.id] = spec
                if not self.ensure_worker().send("add", spec):
                    self.worker_gone()
            elif item[1] in self.at_prefill:
                self.at_prefill.pop(item[1])
                if self.worker is not None:
                    self.worker.send("cancel", item[1])
                self.calls.append((self.listeners.pop(item[1]), None, None))
            elif item[1] in self.requests:   # handed off already: it leaves the decode engine, with its blocks
                request = self.requests.pop(item[1])
                self.first.pop(item[1], None)
                if request in self.scheduler.pending:
                    self.scheduler.pending.remove(request)
                self.scheduler.cancel(request)
                if request.id in self.scheduler.blocks.tables:
                    self.scheduler.blocks.free(request)
                self.calls.append((self.listeners.pop(item[1]), None, None))
                self.scheduler.forget_returned()
        self.queued = len(self.at_prefill) + len(self.scheduler.waiting)

    def take(self, wait_s: float) -> None:
        """Read the worker's messages: hand-offs (copied in here), requests ended there, failures, its death."""
        messages = self.worker.receive(wait_s) if self.worker is not None else []
        if messages is None:
            return self.worker_gone()
        for m in messages:
            if m[0] == "handoff":
                self.held.append(m)
            elif m[0] == "returned" and self.at_prefill.pop(m[1], None) is not None:
                record = m[2]
                cell = next((c for c in record.slots if c.request == m[1]), None)
                self.calls.append((self.listeners.pop(m[1]), record, cell))
            elif m[0] in ("failed", "load_failed"):
                ids = m[1] if m[0] == "failed" else list(self.at_prefill)
                self.fail(ids, m[-1])
        while self.held and self.accept(self.held[0]):
            self.held.pop(0)
        self.scheduler.arrive(max(self.lane.clock, self.now_ms()))   # what was copied in queues at once

    def accept(self, message: tuple) -> bool:
        """Copy a hand-off's blocks into this pool and queue its request (False: no room yet, it waits)."""
        _, request, region, n, send_ms, admit_ms, record = message
        if self.at_prefill.get(request.id) is None:     # cancelled on its way: only its region is freed
            self.worker.send("free", region)
            return True
        blocks = self.scheduler.blocks
        if len(blocks.free_ids) < n:
            return False
        blocks.grow(request, request.num_cached)
        dst = blocks.tables[request.id]
        assert len(dst) == n, "a hand-off copies block for block"
        receive_ms = self.channel.receive(self.lane.runner, dst, region * self.region_blocks)
        self.worker.send("free", region)
        spec = self.at_prefill.pop(request.id)
        cell = next(c for c in record.slots if c.request == request.id)
        end_ms = record.start_ms + record.ms
        transfer_ms = round(send_ms + receive_ms, 3)
        self.first[request.id] = (record, cell, {"arrival": spec.arrival_ms, "admit": admit_ms, "end": end_ms,
                                                 "transfer": transfer_ms, "blocks": n,
                                                 "bytes": n * self.channel.block_bytes})
        request.handoff_at = max(self.now_ms(), self.lane.clock)
        request.status = RequestStatus.PENDING
        self.requests[request.id] = request
        self.scheduler.requests.append(request)
        self.scheduler.send(request)
        return True

    def tell(self, record) -> None:
        """A handed-off request's first token is told with its second, at the end of its first decode step."""
        for cell in record.slots:
            if cell.request in self.first and cell.request in self.listeners:
                p_record, p_cell, t = self.first.pop(cell.request)
                self.calls.append((self.listeners[cell.request], p_record, p_cell))
                ready = t["end"] + t["transfer"]
                parts = {"prefill_queue": t["admit"] - t["arrival"], "prefill": t["end"] - t["admit"],
                         "transfer": t["transfer"], "decode_queue": record.start_ms - ready,
                         "first_decode": record.ms}
                self.made.append({"request": cell.request, "arrival_ms": t["arrival"], "blocks": t["blocks"],
                                  "bytes": t["bytes"],
                                  "ttft_parts": {k: round(v, 3) for k, v in parts.items()}})
        super().tell(record)

    def handoffs(self) -> list[dict]:
        """The hand-offs whose first decode step ended since the last call: request, blocks, bytes, five parts (ms)."""
        made, self.made = self.made, []
        return made

    def fail(self, ids: list[str], why: str) -> None:
        """End these requests (sent to the worker) with `why`: their listeners hear (None, None)."""
        self.failure = why
        for rid in ids:
            if self.at_prefill.pop(rid, None) is not None and rid in self.listeners:
                self.calls.append((self.listeners.pop(rid), None, None))

    def worker_gone(self) -> None:
        """The worker died: every request it held ends with an error; the next request starts a fresh worker."""
        w, self.worker = self.worker, None
        w.process.join(timeout=5)
        self.exited = f"the prefill worker (pid {w.pid}) exited with code {w.exit_code()}"
        self.held.clear()
        self.fail(list(self.at_prefill), self.exited)

    def abort(self):
        """After a decode step failed: drop every request here and at the worker."""
        for rid in list(self.at_prefill):
            if self.worker is not None:
                self.worker.send("cancel", rid)
        self.fail(list(self.at_prefill), self.failure or "the decode engine failed")
        self.first.clear()
        return super().abort()
