"""A served P/D pair's prefill worker: its own process, which prefills the live requests and hands their KV blocks over.

`PrefillWorker` (in the serving process) spawns `prefill_main` with the model's folder, the live lane's config and the
name of the decode side's shared-memory segment, then talks to it over a pipe. The process loads the model, runs a
continuous lane of a `PrefillScheduler` (engine/sched/handoff.py: admit, prefill whole or chunked, write the first
token, give the slot back, hold the blocks) on the decode side's clock (ms since its `t0`, on the host's monotonic
clock), and for each hand-off writes the request's blocks into a free region of the segment (`KVChannel.send`, timed),
frees them here and sends the request (its prompt computed, first token written: `carried`), the region, the send's
ms, when it was admitted and the record of the step that wrote its first token. The decode side reads the region and
says it is free again; with every region in use the hand-offs wait here, holding their blocks, and the prefill
lane's KV budget stops admitting: backpressure. A request that ends on its first token (EOS, max_tokens 1) is sent
back whole ("returned"). A step that raises ends the requests it held ("failed") and the worker goes on; a closed
pipe (the serving process went) ends it. It knows the prefill lane and the channel, nothing of HTTP or streams.

Messages, serving process -> worker: ("add", spec) ("cancel", id) ("free", region) ("stop",).
Worker -> serving process: ("ready", pid, threads) ("handoff", request, region, blocks, send_ms, admit_ms, record)
("returned", id, record) ("failed", ids, why) ("load_failed", why).
"""
import multiprocessing as mp
import os
import time
import traceback

from engine.config import EngineConfig
from engine.disaggregation import carried
from engine.kv.transfer import KVChannel
from engine.lane import Lane
from engine.sched.handoff import PrefillScheduler

START_TIMEOUT_S = 300   # spawning, importing torch and loading the model, on a loaded 2-core machine


class PrefillWorker:
    """The serving process's end of the prefill worker: start it, send it work, read what it sends back."""

    def __init__(self, model: tuple[str, str, str], config: EngineConfig, row_len: int, segment: str,
                 region_blocks: int, regions: int, t0: float):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.loaded = ctx.Value("i", 0, lock=False)   # its compute threads once its model is loaded (0: not yet)
        self.process = ctx.Process(target=prefill_main, name="batch-lanes prefill worker", daemon=True,
                                   args=(child, model, config, row_len, segment, region_blocks, regions, t0,
                                         self.loaded))
        self.process.start()
        child.close()                       # only the child holds its end: its death closes the pipe here
        self.pid = self.process.pid

    @property
    def ready(self) -> bool:
        """Whether its model is loaded (readable from any thread: /healthz)."""
        return self.loaded.value > 0

    @property
    def threads(self) -> int | None:
        return self.loaded.value or None

    def send(self, *message) -> bool:
        """Send a message; False when the worker is gone."""
        try:
            self.conn.send(message)
            return True
        except (OSError, ValueError, BrokenPipeError):
            return False

    def receive(self, wait_s: float) -> list[tuple] | None:
        """Every message waiting (after up to `wait_s` for the first); None once the worker is gone."""
        out = []
        try:
            while self.conn.poll(wait_s if not out else 0):
                out.append(self.conn.recv())
        except (EOFError, OSError):
            return None
        return out

    def exit_code(self) -> int | None:
        return self.process.exitcode

    def close(self) -> None:
        self.send("stop")
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.conn.close()


def prefill_main(conn, model: tuple[str, str, str], config: EngineConfig, row_len: int, segment: str,
                 region_blocks: int, regions: int, t0: float, loaded) -> None:
    """The worker process: load the model, then prefill and hand off until told to stop or the pipe closes."""
    from engine.threads import configure
    configure()
    try:
        from engine.worker.model import compute_threads, load_model
        from engine.worker.runner import ModelRunner
        lm = load_model(model[0], dtype=model[1], device=model[2])
        scheduler = PrefillScheduler(config, [], eos_ids=lm.eos_ids, pad_id=lm.pad_id, timed=True)
        blocks = scheduler.blocks
        runner = ModelRunner(lm, config.slots, blocks.num_blocks, blocks.block_size, fused=config.fused)
        lane = Lane("live/prefill", scheduler, runner, kv_capacity=config.slots * row_len)
        channel = KVChannel(runner.block_bytes, regions * region_blocks, attach=segment)
    except Exception as e:  # the serving process says why on its streams and its log
        conn.send(("load_failed", f"{type(e).__name__}: {e}"))
        return
    loaded.value = compute_threads()
    conn.send(("ready", os.getpid(), loaded.value))
    free = list(range(regions))                 # regions of the segment the decode side has read
    admitted: dict[str, float] = {}             # request -> start of the step that first admitted it
    wrote: dict[str, object] = {}               # request handed off -> the record of the step that wrote its token
    requests = {}

    def now() -> float:
        return round((time.monotonic() - t0) * 1000, 3)

    while True:
        # 1) take what the serving process sent (wait a little when there is nothing to compute)
        idle = not scheduler.has_work() and not (scheduler.handoffs and free)
        try:
            messages = []
            while conn.poll(0.05 if idle and not messages else 0):
                messages.append(conn.recv())
        except (EOFError, OSError):
            return                              # the serving process went
        for m in messages:
            if m[0] == "stop":
                channel.close()
                return
            if m[0] == "add":
                requests[m[1].id] = scheduler.add(m[1])
            elif m[0] == "cancel" and m[1] in requests:
                request = requests.pop(m[1])
                if request in scheduler.handoffs:
                    scheduler.sent(request)     # never copied: its blocks are freed here
                else:
                    scheduler.cancel(request)
                scheduler.forget_returned()
            elif m[0] == "free":
                free.append(m[1])
        # 2) one prefill step
        if scheduler.has_work():
            lane.clock = max(lane.clock, now())
            try:
                record = lane.step()
            except Exception as e:
                traceback.print_exc()
                ids = list(requests)
                for request in list(requests.values()):
                    scheduler.sent(request) if request in scheduler.handoffs else scheduler.cancel(request)
                requests.clear()
                scheduler.forget_returned()
                conn.send(("failed", ids, f"the prefill worker's step failed: {type(e).__name__}: {e}"))
                continue
            for rid in record.admitted:
                admitted.setdefault(rid, record.start_ms)
            for request in scheduler.handoffs:
                wrote.setdefault(request.id, record)
            for rid in record.returned:
                if rid in requests and requests[rid] not in scheduler.handoffs:   # ended on its first token
                    requests.pop(rid)
                    conn.send(("returned", rid, record))
            lane.records.clear()                # a live lane never ends: keep no history here
            scheduler.forget_returned()
        # 3) hand off into free regions: copy the blocks, free them here, send the request
        for request in list(scheduler.handoffs):
            if not free:
                break
            region = free.pop(0)
            table = list(blocks.tables[request.id])
            ms = channel.send(runner, table, region * region_blocks)
            request.matcher = None              # (structured outputs are refused on a P/D pair)
            scheduler.sent(request)
            requests.pop(request.id, None)
            conn.send(("handoff", carried(request), region, len(table), round(ms, 3),
                       admitted.pop(request.id), wrote.pop(request.id)))
