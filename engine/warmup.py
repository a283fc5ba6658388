"""Warming a freshly loaded model up, so that the first run a user watches is not skewed by one-off costs.

`warm_up(lm, max_slots)` runs one continuous-lane workload through the public engine API (`Engine.prepare`,
`Engine.start`, `Run.tick`): the lanes' own code path, with its scheduler, runner, KV cache and packed
linears. Its requests ask for 2, 3, ... max_slots + 1 tokens, so the run makes one prefill call of
max_slots rows and then one decode call of every row count from max_slots down to 1, as they finish.

`measure_noise(lm)` then times NOISE_STEPS identical decode steps (one row, one token) and reports how far they
strayed from their median (`metrics.step_time_spread`, the figure each lane's metrics carry): the machine's step-time
noise, which the page shows next to its ms figures.

What it does not know: which workloads will come, or whether a later run still finds caches warm (the OS may
page memory out on a machine that is short of it); it times its own run and nothing else.
"""
import time
from typing import Callable

from engine.worker.cpu import kernels as cpu_kernels
from engine.engine import Engine
from engine.worker.linears import can_pack
from engine.report.metrics import step_time_spread
from engine.worker.model import LoadedModel
from engine.step import SlotState
from engine.workload.workload import Limits, parse_workload

# Why this shape of warm-up, measured here (float32 SmolLM2-135M, 2 shared cores; demos/mixed.json on static +
# continuous in a fresh process, step-1 ms of the first run / of a second run):
# - no warm-up: static 1197/286, 777/254, 523/254 (2.1-4.2x; a user saw 1389 ms on a server's first run).
# - the cost is the first call through `packed_linears`: oneDNN reorders every linear weight into a packed copy
#   (~0.5 GB; 0.26-0.57 s on its own, more while its page faults land). Packing alone: static 329/265.
# - once packed, shapes do not matter here: each row count 1-16 cost the same in its first prefill call as in its
#   second (1 row ~90 ms, 16 rows ~0.66 s) and in its first decode call as in its second (55-76 ms); a 16-row
#   prefill after a 1-row warm-up ran 1631-1682 ms the first time, 1577-1625 the second (a busy machine).
# - a 1-row run (0.41-0.45 s) already met the 1.5x criterion (ratios 0.92-1.03); this sweep at 16 slots
#   (1.97-2.44 s) gave 1.01-1.06.
# So on this CPU the first packed call is what counts, and one prefill call is enough prefill. The decode sweep
# adds ~1.5 s (max_slots decode calls, and max_slots prompts prefilled in that one call rather than one prompt)
# and covers every decode shape a lane of up to max_slots slots can make, for a device or dtype that does pay
# per shape (CUDA's lazily loaded kernels, bfloat16 without packed linears: not measured here). Prompt lengths
# cannot be covered anyway: a prefill's shape is rows x prompt tokens.
NOISE_STEPS = 12  # identical 1-row decode steps measure_noise times (~55 ms each on this CPU: under a second)
WARM_PROMPT = "Hi."  # the shortest chat prompt: ~33 tokens with the model's chat template


def warm_up(lm: LoadedModel, max_slots: int,
            progress: Callable[[float, str], None] | None = None) -> dict:
    """Run one prefill call of `max_slots` rows and a decode call of every row count from `max_slots` down to 1
    through the engine's continuous lane; report `progress(fraction, message)` before each step and (1.0, ...)
    at the end. Returns what ran, read from the step records: {"prefill_rows": [...], "decode_rows": [...],
    "steps", "seconds"}."""
    assert max_slots >= 1, "warm up at least one slot"
    report = progress or (lambda fraction, message: None)
    t0 = time.perf_counter()
    if lm.decode_step == "fast" and can_pack(lm.model, lm.device):  # the CPU decode step's compiled linear
        report(0.0, "warming up: loading the decode kernel (built once per machine by make setup, else now: ~30 s)")
        cpu_kernels.load()
    limits = Limits(max_requests=max_slots, max_slots=max_slots, max_new_tokens=max_slots + 1,
                    max_total_tokens=10**9, max_lane_kv_tokens=10**9)  # warm every slot the server allows
    engine = Engine(lm, limits)
    # request i writes i + 2 tokens: the first comes out of the prefill, then one request finishes per step
    workload = engine.prepare(parse_workload({"name": "warm-up", "slots": max_slots, "requests": [
        {"id": f"W{i}", "prompt": WARM_PROMPT, "max_new_tokens": i + 2, "ignore_eos": True}
        for i in range(max_slots)]}, limits))
    run = engine.start(workload, ["continuous"])
    # what each step will run, and the share of the warm-up done before it: the first step (the prefill, and the
    # packing of the weights on CPU) took about as long as all the decode steps together
    plan = [(0.0, f"prefill {max_slots} rows")] + [
        (0.5 + 0.5 * k / max_slots, f"decode {n}/{max_slots} rows") for k, n in enumerate(range(max_slots, 0, -1))]
    step = 0
    while not run.done:
        fraction, what = plan[min(step, len(plan) - 1)]
        report(fraction, f"warming up: {what}")
        run.tick()
        step += 1
    prefill_rows, decode_rows = [], []
    for record in run.records()["continuous"]:
        states = [cell.state for cell in record.slots]
        if SlotState.PREFILL in states:
            prefill_rows.append(states.count(SlotState.PREFILL))
        if SlotState.DECODE in states:
            decode_rows.append(states.count(SlotState.DECODE))
    seconds = time.perf_counter() - t0
    report(1.0, f"warmed up in {seconds:.1f} s")
    return {"prefill_rows": prefill_rows, "decode_rows": decode_rows, "steps": step, "seconds": seconds}


def measure_noise(lm: LoadedModel, steps: int = NOISE_STEPS) -> dict:
    """Run one request of `steps` + 1 tokens alone in one slot, through the engine as `warm_up` does: its prefill,
    then `steps` decode calls of the same shape. Returns {"step_noise": their step_time_spread (None: too few),
    "steps": how many decode steps it timed, "median_ms"}."""
    assert steps >= 2, "noise needs at least two steps of one shape"
    limits = Limits(max_requests=1, max_slots=1, max_new_tokens=steps + 1, max_total_tokens=10**9,
                    max_lane_kv_tokens=10**9)
    engine = Engine(lm, limits)
    workload = engine.prepare(parse_workload({"name": "noise", "slots": 1, "requests": [
        {"id": "N", "prompt": WARM_PROMPT, "max_new_tokens": steps + 1, "ignore_eos": True}]}, limits))
    run = engine.start(workload, ["continuous"])
    run.run_to_end()
    records = [r.to_dict() for r in run.records()["continuous"]]
    decodes = [r for r in records if r["forward"] == "decode"]
    times = sorted(r["ms"] for r in decodes)
    return {"step_noise": step_time_spread(decodes), "steps": len(decodes),
            "median_ms": times[len(times) // 2] if times else None}
