"""Loading the model off the worker's own thread, with progress the worker publishes as it arrives.

`load_model` and then `warm_up` run in the background (through the async mode's OS thread pool, app.asyncmode,
or a plain thread) and only record their progress here: loading fills the
bar to LOAD_SHARE, warming the model up for every row count up to the app's `max_slots` fills the rest, so
the first run a user watches is not slowed by one-off costs (see `engine.warmup`). The worker's (green)
thread polls this record and emits `model_status`, since a green-thread hub must not be touched from another
OS thread. This module knows `engine.worker.model` and `engine.warmup`, nothing of runs or sockets.
"""
import logging
from typing import Callable

from engine.worker.model import LoadedModel, ModelLoadError, load_model
from engine.warmup import measure_noise, warm_up

log = logging.getLogger("batch_lanes.loader")
LOAD_SHARE = 0.9  # of the progress bar: loading the model; the warm-up fills the rest


class ModelLoad:
    def __init__(self, path: str | None, dtype: str, device: str, max_slots: int):
        self.args = (path, dtype, device)
        self.max_slots = max_slots        # the most rows a lane may have: the warm-up covers 1..max_slots
        self.progress: tuple[float, str] = (0.0, "loading the model")  # replaced whole by the loading thread
        self.lm: LoadedModel | None = None
        self.error: str | None = None
        self.step_noise: float | None = None  # the machine's step-time noise, measured after the warm-up
        self.done = False

    def start(self, start_task: Callable) -> None:
        """Load in the background: `start_task(fn)` runs `fn` off the worker's own (green) thread."""
        start_task(self._load)

    def _load(self) -> None:
        path, dtype, device = self.args
        try:
            lm = load_model(path, dtype=dtype, device=device, progress=self._reporter(0.0, LOAD_SHARE))
            warm = warm_up(lm, self.max_slots, progress=self._reporter(LOAD_SHARE, 1.0))
            log.info("warmed up in %.1f s: prefill calls of %s rows, decode calls of %d..%d rows", warm["seconds"],
                     warm["prefill_rows"], min(warm["decode_rows"]), max(warm["decode_rows"]))
            self.step_noise = measure_noise(lm)["step_noise"]
            self.lm = lm
        except ModelLoadError as e:
            self.error = str(e)
        except Exception as e:  # torch/transformers failures too: shown on the page and on /healthz
            log.exception("loading the model failed")
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.done = True

    def _reporter(self, start: float, end: float) -> Callable[[float, str], None]:
        """A progress callback whose 0..1 fills [start, end] of the bar."""
        def report(fraction: float, message: str) -> None:
            self.progress = (round(start + (end - start) * fraction, 3), message)
        return report
