"""The decode step itself: transformers' forward (eager) next to engine/fast_decode.py (fast; CUDA graphs on a GPU),
at every batch size, in one process, interleaved call by call. A section of scripts/bench.py, and of
scripts/gpu_check.py on a GPU. Nothing here asserts a timing."""
import statistics
import time
from dataclasses import replace

import torch

from engine.request import Request, RequestSpec
from engine.runner import ModelRunner
from engine.batch import Row
from engine.step import SlotState


def decode_steps(lm, size: dict, records=None) -> dict:
    """ms of one decode call of B rows (each row `context` tokens deep), eager and fast, for B in size["decode_rows"];
    the fast path's batch-B step over its batch-1 step; and what making each runner cost (on CUDA: the graph captures)."""
    rows_list, context, calls = size["decode_rows"], size["decode_context"], size["decode_calls"]
    slots = max(rows_list)
    per_row = -(-(context + 8) // 16)  # blocks of 16 tokens a row: row i reads blocks i*per_row onwards (one view)
    runners, init_ms = {}, {}
    for path in ("eager", "fast"):  # a runner's making: its KV cache, and on CUDA the fast path's graph captures
        t0 = time.perf_counter()
        runners[path] = ModelRunner(replace(lm, decode_step=path), slots, slots * per_row)
        init_ms[path] = (time.perf_counter() - t0) * 1000
    fast = runners["fast"].fast
    out = {"context": context, "calls": calls, "fast_available": fast is not None, "runner_init_ms": init_ms,
           "graph_buckets": sorted(fast.graphs) if fast is not None and fast.graphed else None, "rows": {}}
    for n in rows_list:
        requests = [Request(RequestSpec(id=f"D{i}", prompt="", max_new_tokens=1), order=i) for i in range(n)]
        rows = [Row(i, r, SlotState.DECODE, [lm.pad_id + 1 + i], context, True,
                    blocks=tuple(range(i * per_row, (i + 1) * per_row))) for i, r in enumerate(requests)]
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


def weight_read_floor(lm, mib: int) -> dict:
    """The weight-read floor of one decode step: every weight byte once, at the best of 5 timed reads of `mib` MiB."""
    seen, weight_bytes = set(), 0
    for p in lm.model.parameters():  # tied embedding / lm_head counted once
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            weight_bytes += p.numel() * p.element_size()
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
