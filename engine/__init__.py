"""Batch Lanes' engine: real batched inference over a paged KV cache, one step record per lane per step.

    from engine import Engine, Workload     # loaded on first use

Nothing that needs torch loads up front, so that a web process (which only checks workloads and reads
step records) can import `engine.workload.workload`, `engine.limits` or `engine.report.metrics` without it.
Importing it changes nothing in the process: the entry points set the compute threads up (`threads.configure`).
This file knows only where each public name lives, nothing of what it does.
"""

_WHERE = {"EngineConfig": "config", "Engine": "engine", "Run": "engine", "lane_metrics": "report.metrics",
          **{name: "workload.workload" for name in ("Limits", "Workload", "WorkloadError", "load_workload",
                                                    "parse_workload")}}
__all__ = list(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
