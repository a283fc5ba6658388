"""The decode step itself: transformers' forward (eager) next to engine/worker/fast_decode.py (fast; CUDA graphs on a GPU),
at every batch size, in one process, interleaved call by call. A section of scripts/bench.py, and of
scripts/gpu_check.py on a GPU. Nothing here asserts a timing."""
import statistics
import time
from dataclasses import replace

import torch

from engine.request import Request, RequestSpec
from engine.worker.runner import ModelRunner
from engine.sched.batch import Row
from engine.step import SlotState


def blocks_per_row(context: int) -> int:
    """Blocks of 16 tokens a decode row `context` deep needs, with room for its next tokens."""
    return -(-(context + 8) // 16)


def decode_rows(lm, n: int, context: int) -> list[Row]:
    """n decode rows `context` tokens deep: row i reads blocks i * blocks_per_row onwards (all of them one view)."""
    per_row = blocks_per_row(context)
    requests = [Request(RequestSpec(id=f"D{i}", prompt="", max_new_tokens=1), order=i) for i in range(n)]
    return [Row(i, r, SlotState.DECODE, [lm.pad_id + 1 + i], context, True,
                blocks=tuple(range(i * per_row, (i + 1) * per_row))) for i, r in enumerate(requests)]


def decode_steps(lm, size: dict, records=None) -> dict:
    """ms of one decode call of B rows (each row `context` tokens deep), eager and fast, for B in size["decode_rows"];
    the fast path's batch-B step over its batch-1 step; and what making each runner cost (on CUDA: the graph captures)."""
    rows_list, context, calls = size["decode_rows"], size["decode_context"], size["decode_calls"]
    slots = max(rows_list)
    per_row = blocks_per_row(context)
    runners, init_ms = {}, {}
    for path in ("eager", "fast"):  # a runner's making: its KV cache, and on CUDA the fast path's graph captures
        t0 = time.perf_counter()
        runners[path] = ModelRunner(replace(lm, decode_step=path), slots, slots * per_row)
        init_ms[path] = (time.perf_counter() - t0) * 1000
    fast = runners["fast"].fast
    out = {"context": context, "calls": calls, "fast_available": fast is not None, "runner_init_ms": init_ms,
           "graph_buckets": sorted(fast.graphs) if fast is not None and fast.graphed else None, "rows": {}}
    for n in rows_list:
        rows = decode_rows(lm, n, context)
        times = {path: [] for path in runners}
        tokens = {}
        for i in range(calls + 2):  # two untimed calls first: packed weights, kernels, graphs
            for path, runner in (runners.items() if i % 2 == 0 else reversed(runners.items())):
                t0 = time.perf_counter()
                result = runner.run(rows)  # synchronized on CUDA
                if i >= 2:
                    times[path].append((time.perf_counter() - t0) * 1000)
                tokens[path] = result.tokens
        eager, fast = statistics.median(times["eager"]), statistics.median(times["fast"])
        out["rows"][str(n)] = {"eager_ms": eager, "fast_ms": fast, "speedup": eager / fast,
                               "same_tokens": tokens["eager"] == tokens["fast"]}
    first = out["rows"][str(rows_list[0])]
    for n in rows_list:
        row = out["rows"][str(n)]
        row["fast_over_batch1"] = row["fast_ms"] / first["fast_ms"]
        row["eager_over_batch1"] = row["eager_ms"] / first["eager_ms"]
    return out


def weight_bytes_of(lm) -> int:
    seen, total = set(), 0
    for p in lm.model.parameters():  # tied embedding / lm_head counted once
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel() * p.element_size()
    return total


def weight_read_floor(lm, mib: int) -> dict:
    """The weight-read floor of one decode step: every weight byte once, at the best of 5 timed reads of `mib` MiB."""
    weight_bytes = weight_bytes_of(lm)
    n = mib * 2**20 // 4
    src, dst = torch.ones(n, device=lm.device), torch.empty(n, device=lm.device)
    read_s, copy_s = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        src.sum().item()
        read_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        dst.copy_(src)
        if lm.device.type == "cuda":
            torch.cuda.synchronize()
        copy_s.append(time.perf_counter() - t0)
    read_bw, copy_bw = 4 * n / min(read_s), 2 * 4 * n / min(copy_s)  # best of 5: the machine's capability
    return {"weight_bytes": weight_bytes, "read_gb_per_s": read_bw / 1e9, "copy_gb_per_s": copy_bw / 1e9,
            "floor_ms": weight_bytes / read_bw * 1000}


def paired_floor(lm, size: dict, pairs: int = 15) -> dict:
    """A 1-row decode call and a read of `bandwidth_mib` MiB, alternated `pairs` times: the call over the floor
    read at the same moment (on a shared host the read bandwidth moves between runs more than the call does, so
    a best-of-5 floor taken apart from the steps can make one run's step look 1.4x the floor and the next 2.2x)."""
    context = size["decode_context"]
    runner, row = ModelRunner(lm, 1, blocks_per_row(context)), decode_rows(lm, 1, context)
    n = size["bandwidth_mib"] * 2**20 // 4
    src, weight_bytes = torch.ones(n, device=lm.device), weight_bytes_of(lm)
    calls, floors = [], []
    for i in range(pairs + 2):
        t0 = time.perf_counter()
        runner.run(row)
        call = time.perf_counter() - t0
        t0 = time.perf_counter()
        src.sum().item()
        read = time.perf_counter() - t0
        if i >= 2:  # two untimed pairs first
            calls.append(call * 1000)
            floors.append(weight_bytes / (4 * n / read) * 1000)
    ratios = sorted(c / f for c, f in zip(calls, floors))
    return {"pairs": pairs, "call_ms": statistics.median(calls), "floor_ms": statistics.median(floors),
            "read_gb_per_s_range": [weight_bytes / max(floors) / 1e6, weight_bytes / min(floors) / 1e6],
            "call_over_floor": statistics.median(ratios), "call_over_floor_range": [ratios[0], ratios[-1]]}
