"""A capture: finished live requests as a workload that replays on any lanes (`GET /api/live/capture`).

Which requests: the last N finished ones, or those that arrived in the last S seconds (then at most N of them).
Their arrivals are kept in ms from the first; on request, every quiet gap longer than `compress_over_s` seconds
is cut to `compress_to_s` (traffic minutes apart would otherwise replay as almost all waiting), and the
workload's description says so. Pure: it knows the request summaries the gateway keeps (app.live.gateway), not
the lane, HTTP or the clock.
"""
from collections.abc import Mapping
from dataclasses import dataclass

from engine.limits import WorkloadError

LANES = ("static", "dynamic", "continuous")


@dataclass(frozen=True)
class CaptureSpec:
    last: int | None = None               # at most this many requests, the latest (None: all kept)
    window_s: float | None = None         # only requests that arrived in the last window_s seconds (None: any)
    compress_over_s: float | None = None  # gaps between arrivals longer than this many seconds are cut (None: kept)
    compress_to_s: float = 1.0            # ... to this many seconds

    def __post_init__(self):
        if self.compress_over_s is not None and not 0 <= self.compress_to_s <= self.compress_over_s:
            raise ValueError(f"compress_to_s must be from 0 to compress_over_s ({self.compress_over_s:g}), "
                             f"got {self.compress_to_s:g}")


SECONDS = ("window_s", "compress_over_s", "compress_to_s")
MAX_S = 86400


def capture_spec(args: Mapping[str, str], max_requests: int) -> CaptureSpec:
    """The capture a query asks for (`last`, `window_s`, `compress_over_s`, `compress_to_s`); WorkloadError names
    the field."""
    last = args.get("last", str(max_requests))
    if not last.isdigit() or not 1 <= int(last) <= max_requests:
        raise WorkloadError("last", f"must be a whole number from 1 to {max_requests}, got {last[:20]!r}")
    seconds = {}
    for key in SECONDS:
        if key not in args:
            continue
        try:
            value = float(args[key])
        except ValueError:
            raise WorkloadError(key, f"must be a number of seconds, got {args[key][:20]!r}") from None
        lowest_ok = 0 <= value if key == "compress_to_s" else 0 < value
        if not (lowest_ok and value <= MAX_S):
            raise WorkloadError(key, f"must be {'from 0' if key == 'compress_to_s' else 'above 0'} to {MAX_S} seconds, "
                                     f"got {args[key][:20]}")
        seconds[key] = value
    if "compress_to_s" in seconds and "compress_over_s" not in seconds:
        raise WorkloadError("compress_to_s", "needs compress_over_s (the gaps to compress)")
    try:
        return CaptureSpec(last=int(last), **seconds)
    except ValueError as e:
        raise WorkloadError("compress_to_s", str(e).split(" ", 1)[1]) from None


def capturable(s: dict) -> bool:
    """A request a capture can hold: finished, not cancelled, with some tokens written."""
    return s["status"] == "finished" and s["stop"] != "cancelled" and s["tokens"] > 0


def arrivals(times_ms: list[float], spec: CaptureSpec) -> tuple[list[float], int]:
    """Arrivals in ms from the first (in order), gaps over `compress_over_s` cut; and how many gaps were cut."""
    out, cut = [], 0
    for i, t in enumerate(times_ms):
        if i == 0:
            out.append(0.0)
            continue
        gap = t - times_ms[i - 1]
        if spec.compress_over_s is not None and gap > spec.compress_over_s * 1000:
            gap, cut = spec.compress_to_s * 1000, cut + 1
        out.append(round(out[-1] + gap, 3))
    return out, cut


def describe(n: int, spec: CaptureSpec, cut: int) -> str:
    where = f"that arrived in the last {spec.window_s:g} s" if spec.window_s is not None else "finished last"
    text = f"{n} live request{'s' if n != 1 else ''} {where}, captured from the OpenAI endpoint"
    if spec.compress_over_s is not None:
        text += (f"; gaps over {spec.compress_over_s:g} s compressed to {spec.compress_to_s:g} s "
                 f"({cut} gap{'s' if cut != 1 else ''} cut), so quiet time does not replay as waiting")
    return text + "."


def capture_workload(summaries: list[dict], now_ms: float, slots: int, spec: CaptureSpec) -> dict:
    """The workload of `summaries` (oldest first, the gateway's) that `spec` picks, as of lane time `now_ms`."""
    done = [s for s in summaries if capturable(s)]
    if spec.window_s is not None:
        done = [s for s in done if s["arrival_ms"] >= now_ms - spec.window_s * 1000]
    if spec.last is not None:
        done = done[-spec.last:]
    done = sorted(done, key=lambda s: s["arrival_ms"])
    times, cut = arrivals([s["arrival_ms"] for s in done], spec)
    return {"name": "captured", "description": describe(len(done), spec, cut), "slots": slots, "lanes": list(LANES),
            "requests": [{"id": s["id"], "prompt": s["prompt"], "max_new_tokens": s["tokens"], "ignore_eos": True,
                          "arrival_ms": t} for s, t in zip(done, times)]}
