"""A pipeline-parallel lane's metrics (engine/worker/pipeline_parallel.py): how much of its stages' time went idle in
the pipeline's fill and drain, measured from the records' stage x time grids, beside GPipe's formula.

It knows step records only; a lane whose records carry no grid (one process) gets no keys at all.
"""
from engine.report.stats import mean


def pipeline_parallel_figures(recs: list[dict]) -> dict:
    """A pipeline-parallel lane's mean measured bubble fraction and mean formula over the steps that computed; no
    keys for a lane of one process (its metrics, static/js/core/metrics.js's and tests/golden/metrics.json, stay)."""
    piped = [r for r in recs if r.get("bubble_fraction") is not None]
    if not piped:
        return {}
    return {"placement": recs[0].get("placement"),  # where its stages ran (engine/report/placement.py)
            "mean_bubble_fraction": mean([r["bubble_fraction"] for r in piped]),
            "mean_bubble_formula": mean([r["bubble_formula"] for r in piped])}
