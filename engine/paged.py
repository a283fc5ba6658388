"""The runner's two small jobs around the paged pool: which block table a row reads, and the step's block copies.

`table_of` gives a row its block table: the scheduler's (`Row.blocks`) when it set one, else the slot's own run of
the pool (slot s owns blocks s*M .. s*M+M-1, M = num_blocks // slots), the layout of the slot rows the pool replaced;
a scheduler that hands out no tables runs unchanged on it. `apply_copies` applies a step's swap-outs, swap-ins and
copy-on-write copies, in that order, before the forward, and returns how long they took (synchronized on CUDA).

What it does not know: which blocks a request should get, or when to swap (the scheduler's `block_manager` decides).
"""
import time

import torch

from .batch import Row
from .kv_cache import PagedKVCache


def table_of(row: Row | None, slot: int, slots: int, num_blocks: int) -> tuple[int, ...]:
    """The block table `row` (in `slot`; None: an idle filler slot) reads and writes through."""
    if row is not None and row.blocks:
        return tuple(row.blocks)
    per_slot = num_blocks // slots
    assert per_slot > 0, "a pool of fewer blocks than slots has no table per slot"
    return tuple(range(slot * per_slot, (slot + 1) * per_slot))


def apply_copies(cache: PagedKVCache, swap_out=(), swap_in=(), copies=()) -> float:
    """Apply the step's block copies (device -> host, host -> device, device -> device); their time in ms."""
    if not (swap_out or swap_in or copies):
        return 0.0
    t0 = time.perf_counter()
    cache.swap_out(list(swap_out))
    cache.swap_in(list(swap_in))
    cache.copy(list(copies))
    if cache.device.type == "cuda":
        torch.cuda.synchronize(cache.device)
    return (time.perf_counter() - t0) * 1000
