"""The live lane as the engine worker drives it: made once the model is ready, stepped between two page ticks,
and offered to the gateway as its narrow handle (app.live.handle.LaneHandle).

The worker's loop calls `step()` (one step if the lane has work) and sends what the gateway makes of the
record; HTTP threads call the handle's methods. A step that raises ends the lane's requests with an error
(`failure`, for their listeners) and the lane serves the next ones. What the lane holds (`load`: running,
waiting, KV) is counted here under one lock from the lane's own state after every step or inbox drain, and from
the requests handed in and not yet heard to end, so a scrape or an admission check reads it true at any moment
(idle included). This module knows engine.live and the engine's tokenizer, nothing of HTTP, sockets or the book.
"""
import logging
import threading
import time
from typing import Callable

from engine.spec import RequestSpec
from engine.step import SlotRecord, StepRecord

from . import tokens

log = logging.getLogger("batch_lanes.worker")


class LiveDriver:
    def __init__(self, slots: int, engine: Callable[[], object], status: Callable[[], dict], wake: Callable[[], None],
                 offload: Callable, tokenize_lock: threading.Lock, pace: float = 0.0, sleep: Callable | None = None,
                 options: dict | None = None):
        self.slots_n = slots                  # the lane's slots (0: no live lane, as on a worker process)
        self.options_in = options or {}       # changes to engine.config.LIVE_OPTIONS (--live-options)
        self.engine, self.status, self.wake, self.offload = engine, status, wake, offload
        self.tokenize_lock = tokenize_lock    # one tokenization at a time, shared with the run handlers
        self.pace, self.sleep = pace, sleep or time.sleep  # the simulator's live steps take pace x their ms, as runs'
        self.lane = None                      # the live lane (engine.live.LiveLane), made on the first ask
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()   # guards the three counts below
        self._open: set[str] = set()          # requests handed in whose end (finish or cancel) was not yet heard
        self._running = 0                     # of them, holding a slot after the latest step or drain
        self._kv = (0, 1)                     # (KV tokens held, KV tokens the lane may hold) at the same moment

    # -- driven by the worker's loop -----------------------------------------------------------------
    def ensure(self):
        """The live lane, made once the model is ready (None before, or where this worker has none)."""
        with self._lock:
            if self.lane is None and self.status()["ready"] and self.slots_n:
                from engine.config import live_pd
                if live_pd(self.options_in):   # a served P/D pair: a prefill worker process and this decode engine
                    from engine.live_pd import LivePDLane as LiveLane
                else:
                    from engine.live import LiveLane
                self.lane = LiveLane(self.engine(), slots=self.slots_n, options=self.options_in)
            return self.lane

    def handoffs(self) -> list[dict]:
        """A served P/D pair's hand-offs whose first decode step ended since the last call (engine.live_pd); []."""
        return self.lane.handoffs() if self.lane is not None and hasattr(self.lane, "handoffs") else []

    def pair(self) -> dict | None:
        """A served P/D pair's processes and placement (/healthz), None for a colocated lane or before it is made."""
        if self.lane is None or not hasattr(self.lane, "processes"):
            return None
        from engine.live_pd import TRANSPORT
        from engine.report.placement import placement
        processes = self.lane.processes()
        return {"processes": processes, "placement": placement(
            [{k: p[k] for k in ("role", "pid", "threads")} for p in processes], TRANSPORT,
            self.engine().lm.device.type)}

    def close(self) -> None:
        """End the processes the lane started (a served P/D pair's prefill worker)."""
        if self.lane is not None and hasattr(self.lane, "close"):
            self.lane.close()

    def has_work(self) -> bool:
        return self.lane is not None and self.lane.has_work()

    def step(self) -> StepRecord | None:
        """One step of the lane if it has work, through `offload`; its listeners told on this thread."""
        if not self.has_work():
            return None
        try:
            record = self.offload(self.lane.step)
        except Exception as e:  # a broken live step must not stop the worker: its requests end with an error
            log.exception("live step failed")
            self.lane.failure = f"the engine failed during a live step: {type(e).__name__}: {e}"
            self.lane.abort()
            record = None
        self.lane.notify()                    # on this thread: the streams' queues are the server's
        self.lane.failure = None
        self._recount()
        if self.pace and record is not None and self.engine().lm is None:
            self.sleep(self.pace * record.ms / 1000)
        return record

    def _recount(self) -> None:
        """On the stepping thread, between steps: what holds a slot and the KV it holds, from the lane's state."""
        scheduler = self.lane.scheduler
        running = sum(r is not None for r in scheduler.slots)
        kv = (scheduler.kv_used(), max(1, self.lane.lane.kv_capacity))
        with self._count_lock:
            self._running, self._kv = running, kv

    def load(self) -> dict:
        """{running, waiting, kv_used, kv_capacity} now: zero when idle (no lane yet: zero too)."""
        with self._count_lock:
            return {"running": self._running, "waiting": max(0, len(self._open) - self._running),
                    "kv_used": self._kv[0], "kv_capacity": self._kv[1]}

    # -- the gateway's handle ------------------------------------------------------------------------
    def ready(self) -> bool:
        return self.ensure() is not None

    def not_ready_reason(self) -> str:
        status = self.status()
        return status.get("error") or status.get("message")

    def model(self) -> str:
        return self.status()["model"]

    def submit(self, spec: RequestSpec, listener) -> float:
        def heard(record: StepRecord | None, cell: SlotRecord | None) -> None:
            if record is None or spec.id in record.finished or spec.id in record.returned:
                with self._count_lock:
                    self._open.discard(spec.id)
            listener(record, cell)
        with self._count_lock:
            self._open.add(spec.id)
        return self.lane.submit(spec, heard)

    def cancel(self, request_id: str) -> None:
        """The client left: the request leaves at the next step, which the worker is woken for."""
        self.lane.cancel(request_id)
        self.wake()

    def queued(self) -> int:
        return self.load()["waiting"]

    def failure(self) -> str | None:
        return self.lane.failure

    def decode(self, ids: list[int]) -> str:
        lm = self.engine().lm
        return lm.decode(ids, skip_special_tokens=True) if lm is not None else ""

    def now_ms(self) -> float:
        return self.lane.now_ms()

    def slots(self) -> int:
        return self.lane.scheduler.config.slots

    def traits(self) -> dict:
        return self.lane.scheduler.traits.to_dict()

    def options(self) -> dict:
        return self.lane.options()

    def row_len(self) -> int:
        return self.lane.row_len

    def recent(self) -> list[StepRecord]:
        return list(self.lane.recent)

    def encode_chat(self, messages: list[dict], prompt: str) -> list[int] | None:
        return self._encode(lambda engine: tokens.encode_chat(engine, messages, prompt))

    def encode_text(self, prompt: str) -> list[int] | None:
        return self._encode(lambda engine: tokens.encode_text(engine, prompt))

    def tokenize(self, prompt: str, add_special_tokens: bool) -> list[int] | None:
        """A text's ids with or without the tokenizer's special tokens (POST /tokenize; None: no model yet)."""
        def encode(engine) -> list[int]:
            if engine.lm is None:
                return tokens.encode_text(engine, prompt)
            return list(engine.lm.tokenizer.encode(prompt, add_special_tokens=add_special_tokens))
        return self._encode(encode)

    def detokenize(self, ids: list[int]) -> str | None:
        """Ids as text, special tokens kept (POST /detokenize); ValueError naming an id outside the vocabulary."""
        engine = self.engine()
        if engine is None:
            return None
        if engine.lm is None:
            return ""
        vocab = len(engine.lm.tokenizer)
        bad = next((i for i in ids if not 0 <= i < vocab), None)
        if bad is not None:
            raise ValueError(f"token id {bad} is outside the vocabulary (0 to {vocab - 1})")
        with self.tokenize_lock:
            return engine.lm.decode(ids)

    def token_texts(self, ids: list[int]) -> list[str]:
        lm = self.engine().lm
        if lm is None:
            return [""] * len(ids)
        with self.tokenize_lock:
            return [lm.tokenizer.decode([i], clean_up_tokenization_spaces=False) for i in ids]

    def vocab_size(self) -> int | None:
        lm = self.engine().lm
        return None if lm is None else lm.model.config.vocab_size

    def _encode(self, encode) -> list[int] | None:
        engine = self.engine()
        if engine is None:
            return None
        with self.tokenize_lock:
            return encode(engine)
