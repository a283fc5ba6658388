"""Batch Lanes' engine: real batched inference over a per-slot KV cache, one step record per lane per step."""
import os

# Before torch loads OpenMP: idle OpenMP threads sleep instead of spinning. On a 2-core machine shared with
# a browser, a server and tests, spinning threads made a 70 ms decode step take seconds (measured here).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from .config import EngineConfig  # noqa: E402
from .engine import Engine, Run
from .metrics import lane_metrics
from .workload import Limits, Workload, WorkloadError, load_workload, parse_workload

__all__ = ["EngineConfig", "Engine", "Run", "lane_metrics", "Limits", "Workload", "WorkloadError",
           "load_workload", "parse_workload"]
