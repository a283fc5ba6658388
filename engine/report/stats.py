"""The two statistics every report takes of a list of numbers: the nearest-rank percentile and the mean (None when
empty). One definition, for the lane metrics, the fleet metrics and the scripts."""
from statistics import fmean


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, -(-len(ordered) * q // 100) - 1))
    return ordered[int(k)]


def mean(values: list[float]) -> float | None:
    return fmean(values) if values else None
