"""Batch Lanes' engine: real batched inference over a per-slot KV cache, one step record per lane per step.

    from engine import Engine, Workload     # loaded on first use

Nothing that needs torch loads up front, so that a web process (which only checks workloads and reads
step records) can import `engine.workload`, `engine.limits` or `engine.metrics` without it.
"""
import os

# Before torch loads OpenMP: idle OpenMP threads sleep instead of spinning. On a 2-core machine shared with
# a browser, a server and tests, spinning threads made a 70 ms decode step take seconds (measured here).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_WHERE = {"EngineConfig": "config", "Engine": "engine", "Run": "engine", "lane_metrics": "metrics",
          "Limits": "workload", "Workload": "workload", "WorkloadError": "workload", "load_workload": "workload",
          "parse_workload": "workload"}
__all__ = list(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
