"""Loading the model off the worker's own thread, with progress the worker publishes as it arrives.

`load_model` runs as a background task through `offload` (eventlet's OS thread pool in eventlet mode,
a plain thread in threading mode) and only records its progress here; the worker's (green) thread
polls this record and emits `model_status`, since an eventlet hub must not be touched from another OS
thread. This module knows `engine.model` and nothing of runs or sockets.
"""
import logging
from typing import Callable

from engine.model import LoadedModel, ModelLoadError, load_model

log = logging.getLogger("batch_lanes.loader")


class ModelLoad:
    def __init__(self, path: str | None, dtype: str, device: str):
        self.args = (path, dtype, device)
        self.progress: tuple[float, str] = (0.0, "loading the model")  # replaced whole by the loading thread
        self.lm: LoadedModel | None = None
        self.error: str | None = None
        self.done = False

    def start(self, server, offload: Callable) -> None:
        server.start_background_task(offload, self._load)

    def _load(self) -> None:
        path, dtype, device = self.args
        try:
            self.lm = load_model(path, dtype=dtype, device=device, progress=self._report)
        except ModelLoadError as e:
            self.error = str(e)
        except Exception as e:  # torch/transformers failures too: shown on the page and on /healthz
            log.exception("loading the model failed")
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.done = True

    def _report(self, fraction: float, message: str) -> None:
        self.progress = (round(fraction, 3), message)
