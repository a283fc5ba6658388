"""Service-level objectives: a TTFT and a TPOT target a run's requests are held to, whether one request met them, and
what a lane's requests add up to (how many met them, goodput, attainment).

    "slo": {"ttft_ms": 1500, "tpot_ms": 120}     # in a workload; either target may be left out

A request meets the SLO when it was returned, its TTFT is at most `ttft_ms` and its TPOT at most `tpot_ms` (a one-token
answer has no TPOT and meets that target), as `vllm bench serve --goodput` counts it. Goodput is the requests that met
it per second of the lane's wall clock (DistServe's "requests per second within SLO"); attainment is their share of
the requests returned. Targets are in milliseconds, as every time the metrics report (`ttft_ms`, `tpot_ms`) and the
sweep's `--slo-ttft-ms` are. It knows a request's metrics as `lane_metrics` writes them, nothing of records or runs;
static/js/core/slo.js is its twin.
"""
import math
from dataclasses import dataclass

from engine.limits import WorkloadError

MAX_TARGET_MS = 3_600_000  # an hour: a target beyond it is a typo, not an objective
TARGETS = ("ttft_ms", "tpot_ms")


@dataclass(frozen=True)
class SLO:
    ttft_ms: float | None = None  # a request's time to first token must be at most this (None: no TTFT target)
    tpot_ms: float | None = None  # its time per output token after the first, at most this (None: no TPOT target)

    def __post_init__(self):
        if self.ttft_ms is None and self.tpot_ms is None:
            raise ValueError("slo: give ttft_ms, tpot_ms or both (a target in milliseconds)")
        for key in TARGETS:
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"slo.{key}: must be a number of milliseconds, got {value!r}")
            if not 0 < value <= MAX_TARGET_MS:
                raise ValueError(f"slo.{key}: must be more than 0 and at most {MAX_TARGET_MS} ms, got {value:g}")

    def to_dict(self) -> dict:
        return {key: getattr(self, key) for key in TARGETS if getattr(self, key) is not None}


def parse_slo(raw) -> SLO | None:
    """A workload's `slo` object, checked (None: the workload sets none); WorkloadError names the field."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise WorkloadError("slo", 'must be an object like {"ttft_ms": 1500, "tpot_ms": 120}')
    unknown = sorted(str(k) for k in raw if k not in TARGETS)
    if unknown:
        raise WorkloadError(f"slo.{unknown[0]}", "is not a target: use ttft_ms and tpot_ms (milliseconds)")
    try:
        return SLO(**{k: raw[k] for k in TARGETS if raw.get(k) is not None})
    except ValueError as e:
        field, _, message = str(e).partition(": ")
        raise WorkloadError(field, message) from None


def slo_words(slo: SLO) -> str:
    """The targets in words: "TTFT <= 700 ms, TPOT <= 150 ms"."""
    return ", ".join(f"{key[:4].upper()} <= {getattr(slo, key):g} ms" for key in TARGETS if getattr(slo, key) is not None)


def slo_misses(q: dict, slo: SLO) -> list[str]:
    """The targets a returned request missed ("ttft", "tpot"), from its metrics (`ttft_ms`, `tpot_ms`)."""
    missed = []
    if slo.ttft_ms is not None and q["ttft_ms"] is not None and q["ttft_ms"] > slo.ttft_ms:
        missed.append("ttft")
    if slo.tpot_ms is not None and q["tpot_ms"] is not None and q["tpot_ms"] > slo.tpot_ms:
        missed.append("tpot")
    return missed


def meets_slo(q: dict, slo: SLO) -> bool | None:
    """Whether a request met every target; None while it has not been returned (its times are not final)."""
    if q["return_step"] is None:
        return None
    return not slo_misses(q, slo)


def slo_figures(requests: list[dict], wall_s: float, slo: SLO | None) -> dict:
    """A lane's SLO figures from its requests' metrics: `slo_met` (returned requests that met every target),
    `request_goodput` (those per second of wall time) and `slo_attainment` (their share of the requests returned);
    all None when no SLO is set."""
    if slo is None:
        return {"slo_met": None, "request_goodput": None, "slo_attainment": None}
    verdicts = [v for v in (meets_slo(q, slo) for q in requests) if v is not None]
    met = sum(verdicts)
    return {"slo_met": met, "request_goodput": met / wall_s if wall_s > 0 else None,
            "slo_attainment": met / len(verdicts) if verdicts else None}
