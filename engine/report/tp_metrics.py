"""A tensor-parallel lane's metrics (engine/worker/tensor_parallel.py): how its steps' forward time split between
computing on each rank's shard and waiting in all-reduces, from the records' compute_ms, allreduce_ms and allreduces.

It knows step records only; a lane whose records carry no split (one process) gets no keys at all.
"""
from engine.report.stats import mean


def tensor_parallel_figures(recs: list[dict]) -> dict:
    """A tensor-parallel lane's mean compute and all-reduce ms (and all-reduces) per step that computed; no keys for
    a lane of one process, whose metrics (and static/js/core/metrics.js's, tests/golden/metrics.json) stay as they were."""
    split = [r for r in recs if r.get("allreduce_ms") is not None]
    if not split:
        return {}
    return {"mean_compute_ms": mean([r["compute_ms"] for r in split]),
            "mean_allreduce_ms": mean([r["allreduce_ms"] for r in split]),
            "allreduces_per_step": mean([r["allreduces"] for r in split])}
