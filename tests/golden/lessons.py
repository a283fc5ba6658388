"""Write tests/golden/lessons.json: simulated runs of the `arrivals` and `long-prompt` presets (and of the trace presets
`azure-code-burst` and `mooncake-conversation`) with injected step-time noise (engine.worker.sim.SimNoise), and of the memory
lessons `paged-vs-reserve` and `swap-vs-recompute` (whose claims are tests/js/lanes/memmap-lesson.test.mjs's), for
tests/js/lanes/lessons.test.mjs, which checks that each preset's lesson, as the page writes it (static/js/lanes/lesson.js,
claims.js), is true of the run it describes. Seeded noise, and noise forced each
way: a continuous lane slowed until it finishes after static and dynamic; a chunk step inflated past the
whole-prompt step; LONG's chunks made so quick that its first token comes sooner.

    python -m tests.golden.lessons            # write the fixture
    python -m tests.golden.lessons --check    # exit 1 if the committed fixture is not what this writes

Each run is {preset, description, workload, lanes, records ({lane: [StepRecord.to_dict]}), prompt_tokens}.
"""
import json
import sys
from pathlib import Path

from engine.engine import Engine
from engine.worker.sim import SimNoise
from engine.workload.workload import CLI_LIMITS, parse_workload

ROOT = Path(__file__).resolve().parent.parent.parent
PATH = Path(__file__).resolve().parent / "lessons.json"
SEEDS = range(1, 5)
SPREAD = 0.35  # each simulated call within +-35% of its cost: a busy 2-core machine's noise, measured (issue 20)


def variants() -> list[tuple[str, str, SimNoise | None]]:
    """(preset, label, noise) of every run the fixture holds."""
    out = []
    for preset in ("arrivals", "long-prompt"):
        out.append((preset, "no noise", None))
        out += [(preset, f"seed {seed}", SimNoise(seed, SPREAD)) for seed in SEEDS]
    calls = range(1, 60)
    out += [
        ("arrivals", "continuous's last steps x4", SimNoise(0, 0.0, {("continuous", c): 4.0 for c in range(24, 40)})),
        ("arrivals", "continuous every step x3", SimNoise(1, SPREAD, {("continuous", c): 3.0 for c in calls})),
        ("long-prompt", "one chunk step x5", SimNoise(0, 0.0, {("chunked 64", 6): 5.0})),
        ("long-prompt", "LONG's chunks x0.1", SimNoise(2, SPREAD, {("chunked 64", c): 0.1 for c in range(5, 13)})),
        ("long-prompt", "the whole-prompt step x0.2", SimNoise(3, SPREAD, {("continuous", 5): 0.2})),
    ]
    for preset in ("azure-code-burst", "mooncake-conversation", "fleet-sessions", "fleet-herding", "fleet-one-vs-two",
                   "pd-vs-colocated"):  # replayed traces; the fleet (engine/workload/trace.py)
        out += [(preset, "no noise", None), (preset, "seed 1", SimNoise(1, SPREAD))]
    # the memory lessons (tests/js/lanes/memmap-lesson.test.mjs): noise moves no block, so paged-vs-reserve runs once
    out += [("paged-vs-reserve", "no noise", None), ("swap-vs-recompute", "no noise", None),
            ("swap-vs-recompute", "seed 1", SimNoise(1, SPREAD)),
            # issue 38's busy machine: the swap lane finished later (8.64 vs 8.04 s) though a copied block cost less
            ("swap-vs-recompute", "swap's steps x1.2", SimNoise(0, 0.0, {("swap", c): 1.2 for c in range(1, 200)}))]
    return out


DROP = ("lane", "kv_used", "kv_capacity", "kv_blocks_used", "kv_blocks_total", "kv_blocks_cached", "forward_ms", "waits")
MEMORY = ("kv_tables", "kv_dropped", "kv_cached", "kv_swapped", "kv_tokens")  # only the memory lessons read them


def compact(record: dict, preset: str) -> dict:
    """A step record without what no lesson or metric reads (its KV figures, its lane's name): a smaller fixture."""
    drop = DROP if preset in ("paged-vs-reserve", "swap-vs-recompute") else DROP + MEMORY
    return {k: v for k, v in record.items() if k not in drop}


def make_run(preset: str, noise: SimNoise | None) -> dict:
    obj = json.loads((ROOT / "demos" / f"{preset}.json").read_text())
    engine = Engine(None, CLI_LIMITS, sim_noise=noise)
    workload = engine.prepare(parse_workload(obj, CLI_LIMITS))
    run = engine.start(workload)
    run.run_to_end()
    return {"preset": preset, "description": obj["description"], "workload": workload.to_dict(),
            "lanes": list(run.lanes), "records": {k: [compact(r.to_dict(), preset) for r in v] for k, v in run.records().items()},
            "prompt_tokens": {r.id: len(r.prompt_ids) for r in workload.requests}}


def fixture() -> str:
    runs = {f"{preset}: {label}": make_run(preset, noise) for preset, label, noise in variants()}
    return json.dumps(runs, separators=(",", ":")) + "\n"


def main(argv: list[str]) -> int:
    text = fixture()
    if "--check" in argv:
        if not PATH.exists() or PATH.read_text() != text:
            print(f"{PATH} is stale: run python -m tests.golden.lessons", file=sys.stderr)
            return 1
        return 0
    PATH.write_text(text)
    print(f"wrote {PATH} ({len(text) // 1024} KiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
