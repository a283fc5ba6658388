"""The live lane as the engine worker drives it: made once the model is ready, stepped between two page ticks,
and offered to the gateway as its narrow handle (app.live.handle.LaneHandle).

The worker's loop calls `step()` (one step if the lane has work) and sends what the gateway makes of the
record; HTTP threads call the handle's methods. A step that raises ends the lane's requests with an error
(`failure`, for their listeners) and the lane serves the next ones. This module knows engine.live and the
engine's tokenizer, nothing of HTTP, sockets or the book.
"""
import logging
import threading
from typing import Callable

from engine.request import RequestSpec
from engine.step import StepRecord

from . import tokens

log = logging.getLogger("batch_lanes.worker")


class LiveDriver:
    def __init__(self, slots: int, engine: Callable[[], object], status: Callable[[], dict], wake: Callable[[], None],
                 offload: Callable, tokenize_lock: threading.Lock):
        self.slots_n = slots                  # the lane's slots (0: no live lane, as on a worker process)
        self.engine, self.status, self.wake, self.offload = engine, status, wake, offload
        self.tokenize_lock = tokenize_lock    # one tokenization at a time, shared with the run handlers
        self.lane = None                      # the live lane (engine.live.LiveLane), made on the first ask
        self._lock = threading.Lock()

    # -- driven by the worker's loop -----------------------------------------------------------------
    def ensure(self):
        """The live lane, made once the model is ready (None before, or where this worker has none)."""
        with self._lock:
            if self.lane is None and self.status()["ready"] and self.slots_n:
                from engine.live import LiveLane
                self.lane = LiveLane(self.engine(), slots=self.slots_n)
            return self.lane

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
        return record

    # -- the gateway's handle ------------------------------------------------------------------------
    def ready(self) -> bool:
        return self.ensure() is not None

    def not_ready_reason(self) -> str:
        status = self.status()
        return status.get("error") or status.get("message")

    def model(self) -> str:
        return self.status()["model"]

    def submit(self, spec: RequestSpec, listener) -> float:
        return self.lane.submit(spec, listener)

    def cancel(self, request_id: str) -> None:
        self.lane.cancel(request_id)

    def queued(self) -> int:
        return self.lane.queued

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

    def row_len(self) -> int:
        return self.lane.row_len

    def recent(self) -> list[StepRecord]:
        return list(self.lane.recent)

    def encode_chat(self, messages: list[dict], prompt: str) -> list[int] | None:
        return self._encode(lambda engine: tokens.encode_chat(engine, messages, prompt))

    def encode_text(self, prompt: str) -> list[int] | None:
        return self._encode(lambda engine: tokens.encode_text(engine, prompt))

    def token_texts(self, ids: list[int]) -> list[str]:
        lm = self.engine().lm
        if lm is None:
            return [""] * len(ids)
        with self.tokenize_lock:
            return [lm.tokenizer.decode([i], clean_up_tokenization_spaces=False) for i in ids]

    def compile_json(self, schema: str) -> object:
        from engine import grammar
        lm = self.engine().lm
        why = "the simulator has no logits" if lm is None else grammar.missing()
        if why:
            raise ValueError(f"JSON output needs constrained decoding, unavailable here: {why}")
        with self.tokenize_lock:
            return grammar.compile_json(lm, None if schema == "{}" else schema)

    def vocab_size(self) -> int | None:
        lm = self.engine().lm
        return None if lm is None else lm.model.config.vocab_size

    def _encode(self, encode) -> list[int] | None:
        engine = self.engine()
        if engine is None:
            return None
        with self.tokenize_lock:
            return encode(engine)
