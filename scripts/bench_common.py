"""Helpers every benchmark section shares: timing side by side, preparing workloads, collecting step records.
Nothing here knows a section's question; `bench.py` runs the sections, `bench_features.py` holds the
engine-feature ones."""
import statistics
import sys
import time
from pathlib import Path

from engine.threads import configure

configure()  # OMP_WAIT_POLICY=PASSIVE before anything loads torch (every bench script imports this module first)
from engine import Engine, parse_workload  # noqa: E402
from engine.workload.workload import CLI_LIMITS  # noqa: E402
from scripts.chat_prompts import CHAT_PROMPTS  # noqa: E402,F401  (re-exported to the bench sections)

ROOT = Path(__file__).resolve().parent.parent


T0 = time.perf_counter()


def log(message: str) -> None:
    print(f"[bench {time.perf_counter() - T0:6.1f}s] {message}", file=sys.stderr, flush=True)


def median(values) -> float:
    return statistics.median(values)


def prepare(engine: Engine, obj: dict):
    return engine.prepare(parse_workload(obj, CLI_LIMITS))


def timed_run(engine: Engine, workload, lanes: list[str]):
    """(run, seconds) for one run of `workload` from `start` (KV cache allocation included) to its end."""
    t0 = time.perf_counter()
    run = engine.start(workload, lanes)
    run.run_to_end()
    return run, time.perf_counter() - t0


def outputs(run, lane: str) -> list[list[int]]:
    return [list(r.output_ids) for r in run.lanes[lane].requests]


def side_by_side(theirs, ours, repeats: int) -> dict:
    """Time `theirs()` and `ours()` (each returns (output, seconds)) `repeats` times, alternating which runs
    first, so that a change in the machine's load lands on both; the ratio is the median of each pair's
    their/our seconds (above 1: ours is faster)."""
    their_s, our_s, outs = [], [], []
    for i in range(repeats):
        pair = {}
        for name, fn in ((("theirs", theirs), ("ours", ours)) if i % 2 == 0 else (("ours", ours), ("theirs", theirs))):
            pair[name] = fn()
        their_s.append(pair["theirs"][1])
        our_s.append(pair["ours"][1])
        outs.append((pair["theirs"][0], pair["ours"][0]))
    return {"their_s": their_s, "our_s": our_s, "outputs": outs,
            "ratio": median([t / o for t, o in zip(their_s, our_s)])}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


class Records:
    """Every step record the model runs wrote, by section: the overhead section reads them."""

    def __init__(self):
        self.by_section: dict[str, list] = {}

    def add(self, section: str, run) -> None:
        for recs in run.records().values():
            self.by_section.setdefault(section, []).extend(recs)
