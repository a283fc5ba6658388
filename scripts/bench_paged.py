"""The paged KV cache next to the slot rows it replaced, in one process, interleaved call by call. A section of
scripts/bench.py (`paged_cache`); nothing here asserts a timing.

"slots" is the old code path itself: engine/ as it was at commit SLOT_ROWS_COMMIT (one `(slots, kv_heads, row + 1,
head_dim)` row per slot), extracted from git into a temporary package and run on the same model. "paged" is today's
runner with every row's blocks scattered over the pool (a random permutation), its decode attention the compiled
kernel that reads them in place (engine/worker/cpu/paged_attention.cpp); "paged_gather" the same tables with that kernel
off (each layer gathers the blocks into a workspace, then sdpa), and "paged_runs" today's runner with each row's blocks
one run, equally spaced (read as a view by the gather path, in place by the kernel).
Measured: the decode step at 1/4/8/16 rows and 128/512 tokens of context, what the gather costs of that, a
one-row prefill of 64/256 tokens, swap-out and swap-in ms per block next to recompute ms per block (a prefill of
one block's tokens), a lane's KV bytes before (slots x row) and after (the budget's blocks), and where a 1-row
decode step's ms go (`decode_profile`: linears, attention, the work between them, the rest).
"""
import importlib
import io
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import types
import time

import torch

from engine.sched.batch import Row
from engine.request import Request, RequestSpec
from engine.worker.runner import ModelRunner
from engine.step import SlotState
from scripts.bench_common import ROOT, median

SLOT_ROWS_COMMIT = "4c9b636"  # the last commit with per-slot rows (engine/worker/kv_cache.py's SlotKVCache)
BLOCK = 16


def slot_rows_engine():
    """engine/ of SLOT_ROWS_COMMIT as the package `engine_slot_rows` (None where git or that commit is not there)."""
    try:
        blob = subprocess.run(["git", "-C", str(ROOT), "archive", SLOT_ROWS_COMMIT, "engine"], check=True,
                              capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    folder = tempfile.mkdtemp(prefix="slot_rows_")
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(folder, filter="data")
    os.rename(os.path.join(folder, "engine"), os.path.join(folder, "engine_slot_rows"))
    sys.path.insert(0, folder)
    # the compiled decode kernel: today's module, so that its build (keyed by the source's path) is not redone, under
    # the names that commit called it by (its cpu_kernels module, whose kernel() is today's load())
    from engine.worker.cpu import kernels
    old = importlib.import_module("engine_slot_rows")
    then = types.ModuleType("engine_slot_rows.cpu_kernels")
    then.__dict__.update({k: v for k, v in vars(kernels).items() if not k.startswith("__")}, kernel=kernels.load)
    sys.modules["engine_slot_rows.cpu_kernels"] = old.cpu_kernels = then
    for name in ("runner", "batch", "request", "step"):
        importlib.import_module(f"engine_slot_rows.{name}")
    return sys.modules["engine_slot_rows"]


def timed_calls(runners: dict, rows_of, calls: int) -> dict[str, float]:
    """Median ms of `calls` runs of each runner on its rows, interleaved (two untimed calls first)."""
    times = {name: [] for name in runners}
    for i in range(calls + 2):
        for name, runner in (runners.items() if i % 2 == 0 else reversed(runners.items())):
            rows = rows_of(name)
            t0 = time.perf_counter()
            runner.run(rows)
            if i >= 2:
                times[name].append((time.perf_counter() - t0) * 1000)
    return {name: median(t) for name, t in times.items()}


def runs(rows: int, per_row: int) -> list[tuple[int, ...]]:
    """Row i's table: blocks i*per_row .. (i+1)*per_row - 1 (the old slot rows' layout: read as one view)."""
    return [tuple(range(i * per_row, (i + 1) * per_row)) for i in range(rows)]


def make_runners(lm, old, slots: int, row_len: int) -> tuple[dict, dict]:
    per_slot = -(-row_len // BLOCK)
    ids = list(range(slots * per_slot))
    random.Random(0).shuffle(ids)
    tables = {"paged": [tuple(ids[i * per_slot:(i + 1) * per_slot]) for i in range(slots)],
              "paged_runs": runs(slots, per_slot)}
    tables["paged_gather"] = tables["paged"]
    runners = {name: ModelRunner(lm, slots, slots * per_slot, BLOCK) for name in ("paged", "paged_gather", "paged_runs")}
    if runners["paged_gather"].fast is not None:
        runners["paged_gather"].fast.ops = None  # the gather + sdpa path
    if old is not None:
        runners["slots"] = old.runner.ModelRunner(lm, slots, row_len)
        tables["slots"] = [()] * slots
    return runners, tables


def rows_for(tables, state: str, n: int, tokens: list[int], start: int, old=None):
    """Rows of n requests feeding `tokens` at `start` (state "prefill" or "decode"); the old runner's rows are made of
    its own package's classes."""
    def rows_of(name):
        pkg = (old.batch, old.request, old.step) if name == "slots" else None
        row, req, spec, step = (pkg[0].Row, pkg[1].Request, pkg[1].RequestSpec, pkg[2].SlotState) if pkg else \
            (Row, Request, RequestSpec, SlotState)
        requests = [req(spec(id=f"P{i}", prompt="", max_new_tokens=1), order=i) for i in range(n)]
        return [row(i, r, step(state), tokens, start, True, **({"blocks": tables[name][i]} if name != "slots" else {}))
                for i, r in enumerate(requests)]
    return rows_of


def gather_ms(runner: ModelRunner, tables, n: int, context: int, repeats: int = 5) -> dict:
    """ms of reading one decode call's K and V through the tables, all layers (what the attention reads)."""
    cache, out = runner.cache, {}
    for name, t in (("gathered", [list(x) for x in tables[:n]]),
                    ("view", [list(x) for x in runs(n, cache.num_blocks // len(tables))])):
        cache.plan(t, [[-1]] * n, context)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for layer in cache.layers:
                cache.read(layer.keys, which=0), cache.read(layer.values, which=1)
            times.append((time.perf_counter() - t0) * 1000)
        out[name + "_ms"] = median(times)
    return out


def attends_in_place(runner: ModelRunner) -> bool:
    """Whether the runner's decode step uses the compiled paged-attention kernel (else gather + sdpa)."""
    return runner.fast is not None and runner.fast.ops is not None


def paged_cache(lm, size: dict, records=None) -> dict:
    old = slot_rows_engine()
    rows_list, contexts, calls = size["paged_rows"], size["paged_contexts"], size["decode_calls"]
    out = {"slot_rows": f"engine/ at commit {SLOT_ROWS_COMMIT}" if old else None, "block_size": BLOCK,
           "paged_kernel": "in place" if attends_in_place(ModelRunner(lm, 1, 1, BLOCK)) else "off (gather + sdpa)",
           "decode": {}, "prefill": {}}
    with torch.inference_mode():
        for context in contexts:
            runners, tables = make_runners(lm, old, max(rows_list), context + BLOCK)
            for n in rows_list:
                ms = timed_calls(runners, rows_for(tables, "decode", n, [lm.pad_id + 1], context, old), calls)
                entry = {**{f"{k}_ms": v for k, v in ms.items()}, **gather_ms(runners["paged"], tables["paged"], n,
                                                                             context + 1)}
                entry["kernel_over_gather"] = ms["paged"] / ms["paged_gather"]
                if "slots" in ms:
                    entry["paged_over_slots"] = ms["paged"] / ms["slots"]
                    entry["gather_over_slots"] = ms["paged_gather"] / ms["slots"]
                    entry["runs_over_slots"] = ms["paged_runs"] / ms["slots"]
                out["decode"][f"{n}x{context}"] = entry
            del runners
        runners, tables = make_runners(lm, old, 1, max(size["paged_prefill"]) + BLOCK)
        for length in size["paged_prefill"]:
            prompt = [(7 * j) % 1000 + 1 for j in range(length)]
            ms = timed_calls(runners, rows_for(tables, "prefill", 1, prompt, 0, old),
                             max(2, calls // 3))
            out["prefill"][str(length)] = {**{f"{k}_ms": v for k, v in ms.items()},
                                           **({"paged_over_slots": ms["paged"] / ms["slots"]} if "slots" in ms else {})}
        out["swap"] = swap_vs_recompute(lm, runners, tables, calls)
        out["kv_bytes"] = lane_bytes(lm, old)
        out["profile_1_row"] = decode_profile(lm, calls=calls)
    return out


def swap_vs_recompute(lm, runners, tables, calls: int, blocks: int = 16) -> dict:
    runner = ModelRunner(lm, 1, blocks, BLOCK, host_blocks=blocks)
    pairs = [(i, i) for i in range(blocks)]
    out_ms = [runner.cache.apply(swap_out=pairs) for _ in range(calls)]
    in_ms = [runner.cache.apply(swap_in=pairs) for _ in range(calls)]
    prompt = [(7 * j) % 1000 + 1 for j in range(BLOCK)]
    recompute = timed_calls({"paged": runners["paged"]}, rows_for(tables, "prefill", 1, prompt, 0),
                            max(2, calls // 3))["paged"]
    swap_out, swap_in = median(out_ms) / blocks, median(in_ms) / blocks
    return {"blocks_per_copy": blocks, "swap_out_ms_per_block": swap_out, "swap_in_ms_per_block": swap_in,
            "recompute_ms_per_block": recompute, "recompute_over_swap_round_trip": recompute / (swap_out + swap_in),
            "host_pool": "pinned host memory" if runner.cache.host.is_pinned() else "a separate CPU tensor (same DRAM)"}


def lane_bytes(lm, old, slots: int = 8, row_len: int = 512, budget: int = 448) -> dict:
    """A lane of `slots` slots whose longest request needs `row_len` tokens, with a KV budget of `budget` tokens."""
    after = ModelRunner(lm, slots, budget // BLOCK, BLOCK).kv_bytes if budget // BLOCK >= slots else None
    before = None
    if old is not None:
        cache = old.runner.ModelRunner(lm, slots, row_len).cache
        before = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    return {"slots": slots, "row_len": row_len, "kv_budget": budget, "slot_rows_bytes": before, "paged_bytes": after,
            "paged_over_slot_rows": after / before if before and after else None}


def decode_profile(lm, context: int = 128, calls: int = 15) -> dict:
    """Where a 1-row decode step's ms go (manual timers, medians): the whole step (runner.run); all its linears
    (q|k|v, o, gate|up, down of every layer and the lm_head, on the same packed/compiled weights); the attention
    (the in-place kernel, or gather + sdpa); the work between the linears (the compiled path's layer_ops: RoPE
    with the K/V write, the residual adds with the norms, SiLU * up; elsewhere the K/V writes alone); and the rest
    (embedding, RoPE's angles, sampling, Python and dispatch; elsewhere also norms, RoPE, SiLU and adds) as the
    step minus those."""
    per = -(-(context + BLOCK) // BLOCK)
    runner = ModelRunner(lm, 1, per, BLOCK)
    fast = runner.fast
    if fast is None:
        return {"skipped": "no fast decode step"}
    tables = {"paged": [tuple(range(per))]}
    rows_of = rows_for(tables, "decode", 1, [lm.pad_id + 1], context)
    w, cache, H, KV, D, ops = fast.w, fast.cache, fast.heads, fast.kv_heads, fast.head_dim, fast.ops
    E = lm.model.config.hidden_size
    plan = cache.plan([list(range(per))], [[context]], context + 1)
    table, lens, slot = torch.tensor([list(range(per))]), torch.tensor([context + 1]), torch.tensor([context])
    x, q, kv = torch.randn(1, E), torch.randn(1, H, D), torch.randn(1, KV, D)
    o_in, down_in = torch.randn(1, H * D), torch.randn(1, fast.inter)
    qkv, gu, d = torch.randn(1, (H + 2 * KV) * D), torch.randn(1, 2 * fast.inter), torch.randn(1, E)
    cos, sin = torch.ones(1, D), torch.zeros(1, D)

    def linears():
        for _, qkv_w, o_w, _, gu_w, down_w in w.layers:
            w.linear(x, qkv_w), w.linear(o_in, o_w), w.linear(x, gu_w), w.linear(down_in, down_w)
        w.linear(x, w.lm_head)

    def attention():
        for layer in cache.layers:
            if ops is not None:
                ops.paged_decode_attention(q, layer.keys, layer.values, table, lens, D ** -0.5)
            else:
                k, v = cache.read(layer.keys, plan, 0), cache.read(layer.values, plan, 1)
                torch.nn.functional.scaled_dot_product_attention(q.reshape(1, KV, H // KV, D), k, v)

    def between():
        for (norm1, *_), layer in zip(w.layers, cache.layers):
            if ops is None:
                cache.write(layer, kv, kv, plan)
                continue
            ops.rope_write(qkv, cos, sin, layer.keys, layer.values, slot, H)
            for _ in range(2):
                ops.add_rms_norm(x, d, norm1.weight, norm1.variance_epsilon)  # x += d in place, then normed
            ops.silu_mul(gu)

    name = "layer_ops" if ops is not None else "kv_writes"
    parts = {"step": lambda: runner.run(rows_of("paged")), "linears": linears, "attention": attention, name: between}
    out = {}
    with torch.inference_mode():
        for part, fn in parts.items():
            times = []
            for i in range(calls + 2):
                t0 = time.perf_counter()
                fn()
                if i >= 2:
                    times.append((time.perf_counter() - t0) * 1000)
            out[f"{part}_ms"] = median(times)
    out["rest_ms"] = out["step_ms"] - out["linears_ms"] - out["attention_ms"] - out[f"{name}_ms"]
    out.update(context=context, attention="in-place kernel" if ops is not None else "gather + sdpa")
    return out
