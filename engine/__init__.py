"""Batch Lanes' engine: real batched inference over a per-slot KV cache, one step record per lane per step."""
from .config import EngineConfig
from .engine import Engine, Run
from .metrics import lane_metrics
from .workload import Limits, Workload, WorkloadError, load_workload, parse_workload

__all__ = ["EngineConfig", "Engine", "Run", "lane_metrics", "Limits", "Workload", "WorkloadError",
           "load_workload", "parse_workload"]
